"""The one trace the engine tests read their values with: every value each block serves
(decided from the blocks' own availability, outside the trace), the lens of the last
stream, the logits."""

from __future__ import annotations


def _plan(engine) -> dict:
    """Which values each block serves, decided outside the trace."""
    plan = {}
    for i in range(engine.num_layers):
        layer = engine.layers[i]
        plan[i] = {
            "interior": layer.self_attn.unavailable_reason("attention_queries") is None,
            "neurons": layer.mlp.unavailable_reason("mlp_neurons") is None,
            "activation": layer.mlp.unavailable_reason("mlp_activation") is None,
        }
    return plan


def trace_values(engine, prompt: str) -> dict:
    """Every served value of every block, the lens and the logits: one greedy trace."""
    plan = _plan(engine)
    with engine.trace(prompt, temperature=0.0, max_tokens=1):
        saved = dict().save()
        saved["input_ids"] = engine.input_ids.save()
        saved["input_size"] = engine.input_size.save()
        saved["token_embeddings"] = engine.token_embeddings.save()
        for i in range(engine.num_layers):
            layer = engine.layers[i]
            attn = layer.self_attn
            mlp = layer.mlp
            saved[("layer_input", i)] = layer.layer_input.save()
            if plan[i]["interior"]:
                saved[("attention_queries", i)] = attn.attention_queries.save()
                saved[("attention_keys", i)] = attn.attention_keys.save()
                saved[("attention_values", i)] = attn.attention_values.save()
                saved[("attention_scores", i)] = attn.attention_scores.save()
                saved[("attention_probabilities", i)] = attn.attention_probabilities.save()
                saved[("attention_head_outputs", i)] = attn.attention_head_outputs.save()
            saved[("attention_output", i)] = attn.attention_output.save()
            if plan[i]["neurons"]:
                saved[("mlp_neurons", i)] = mlp.mlp_neurons.save()
            if plan[i]["activation"]:
                saved[("mlp_activation", i)] = mlp.mlp_activation.save()
            saved[("mlp_output", i)] = mlp.mlp_output.save()
            saved[("layer_output", i)] = layer.layer_output.save()
        saved["lens"] = engine.project_on_vocab(engine.layers[-1].layer_output[:, -1:]).save()
        saved["logits"] = engine.logits.save()
        saved["next_token_probs"] = engine.next_token_probs.save()
    saved["plan"] = plan
    return saved
