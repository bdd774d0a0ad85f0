"""A session prompt request vs raw nnsight traces, on the tiny checkpoint.

Two baselines on the same engine: one plain `model.trace` saving every served value, each
layer's pattern and lens whole (what the session's request shipped before it painted only
what is on screen), and the raw forward (a trace saving only the logits). Ratio > 1: the
session costs that much more per prompt.
"""

from __future__ import annotations

import torch

from common import ENGINE_KWARGS, median_seconds, report

PROMPT = "The Eiffel Tower is in Paris and the Colosseum is in Rome"


def raw_trace(model):
    with model.trace(PROMPT, temperature=0.0, max_tokens=1):
        saved = list().save()
        saved.append(model.token_embeddings)
        for layer in model.layers:
            attn, mlp = layer.self_attn, layer.mlp
            saved.append(layer.layer_input)
            saved.append(attn.attention_queries)
            saved.append(attn.attention_keys)
            saved.append(attn.attention_values)
            saved.append(attn.attention_scores)
            saved.append(attn.attention_probabilities)
            saved.append(attn.attention_head_outputs)
            saved.append(attn.attention_output)
            saved.append(mlp.mlp_neurons)
            saved.append(mlp.mlp_output)
            saved.append(layer.layer_output)
            saved.append(torch.softmax(model.project_on_vocab(layer.layer_output), -1).topk(5))
        saved.append(model.logits)
    return saved


def raw_forward(model):
    with model.trace(PROMPT, temperature=0.0, max_tokens=1):
        logits = model.logits.cpu().save()
    return logits


def main() -> str:
    from nnterp_widgets.checkpoints import checkpoint
    from nnterp_widgets.session import Session

    session = Session.open(checkpoint("qwen2"), progress=False, **ENGINE_KWARGS).wait()
    raw = median_seconds(lambda: session.request(raw_trace, key="raw").result())
    forward = median_seconds(lambda: session.request(raw_forward, key="forward").result())
    probed = median_seconds(lambda: session.prompt(PROMPT).result())
    session.close()
    return report(
        "Session prompt request vs raw nnsight traces (tiny checkpoint)",
        [
            ("raw trace saving every value (median)", f"{raw * 1e3:.1f} ms"),
            ("raw forward, logits only (median)", f"{forward * 1e3:.1f} ms"),
            ("session prompt request (median)", f"{probed * 1e3:.1f} ms"),
            ("ratio prompt / every-value trace", f"{probed / raw:.2f}"),
            ("ratio prompt / raw forward", f"{probed / forward:.2f}"),
        ],
    )


if __name__ == "__main__":
    main()
