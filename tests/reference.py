"""The independent reference: the same tiny checkpoint in transformers, float32, eager.

`reference_values` runs one prompt and returns, per standard name, what transformers
computes at the corresponding place, read with plain forward hooks — nothing here
touches vLLM or nnsight.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import torch


@dataclass(frozen=True)
class HFNames:
    """Where a family's standard values are in the transformers implementation."""

    layers: str
    embed: str
    attention: str
    mlp: str
    down: str


HF_NAMES = {
    "qwen2": HFNames("model.layers", "model.embed_tokens", "self_attn", "mlp", "down_proj"),
    "llama": HFNames("model.layers", "model.embed_tokens", "self_attn", "mlp", "down_proj"),
    "gpt2": HFNames("transformer.h", "transformer.wte", "attn", "mlp", "c_proj"),
}


@lru_cache(maxsize=None)
def hf_model(path: str):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    return model, AutoTokenizer.from_pretrained(path)


def _get(module: torch.nn.Module, dotted: str) -> torch.nn.Module:
    for part in dotted.split("."):
        module = module[int(part)] if part.isdigit() else getattr(module, part)
    return module


def reference_values(
    path: str,
    family: str,
    prompt: str,
    edit: Callable[[int, torch.Tensor], torch.Tensor] | None = None,
) -> dict:
    """Standard values of ``prompt`` in transformers, each ``[1, tokens, ...]``.

    ``edit(layer_index, layer_output) -> new layer_output`` is applied to each block's
    output stream, to check that an edit on the engine has the same effect.
    """
    model, tokenizer = hf_model(path)
    names = HF_NAMES[family]
    ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
    found: dict = {"input_ids": ids}
    handles = []

    def keep(key, value):
        found[key] = value.detach().clone()

    def first(value):
        return value[0] if isinstance(value, tuple) else value

    layers = _get(model, names.layers)
    handles.append(_get(model, names.embed).register_forward_hook(lambda m, a, o: keep("token_embeddings", o)))
    for index, layer in enumerate(layers):
        def pre(module, args, kwargs, index=index):
            hidden = args[0] if args else kwargs["hidden_states"]
            keep(("layer_input", index), hidden)

        def post(module, args, kwargs, output, index=index):
            hidden = first(output)
            if edit is not None:
                hidden = edit(index, hidden)
                output = (hidden, *output[1:]) if isinstance(output, tuple) else hidden
            keep(("layer_output", index), hidden)
            return output

        handles.append(layer.register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(layer.register_forward_hook(post, with_kwargs=True))
        attention = _get(layer, names.attention)
        handles.append(attention.register_forward_hook(
            lambda m, a, o, index=index: keep(("attention_output", index), first(o))))
        mlp = _get(layer, names.mlp)
        handles.append(mlp.register_forward_hook(lambda m, a, o, index=index: keep(("mlp_output", index), o)))
        handles.append(_get(mlp, names.down).register_forward_pre_hook(
            lambda m, a, index=index: keep(("mlp_neurons", index), a[0])))
    try:
        with torch.no_grad():
            logits = model(ids).logits
    finally:
        for handle in handles:
            handle.remove()
    found["logits"] = logits[:, -1:].clone()
    found["next_token_probs"] = torch.softmax(logits[:, -1], dim=-1)
    return found


def reference_attention(path: str, family: str, prompt: str) -> dict:
    """Per layer, what transformers' eager attention sees and returns.

    ``{(name, layer): tensor}`` for queries/keys/values ``[1, heads, tokens, head_dim]``
    (after rotary; keys and values with kv heads, before repeat), head outputs
    ``[1, tokens, heads, head_dim]`` and probabilities ``[1, heads, query, key]``,
    captured by wrapping the modeling module's ``eager_attention_forward``.
    """
    import sys

    model, tokenizer = hf_model(path)
    layers = _get(model, HF_NAMES[family].layers)
    attention_cls = type(_get(layers[0], HF_NAMES[family].attention))
    module = sys.modules[attention_cls.__module__]
    real = module.eager_attention_forward
    found: dict = {}
    index_of = {id(_get(layer, HF_NAMES[family].attention)): i for i, layer in enumerate(layers)}

    def spy(attention, query, key, value, *args, **kwargs):
        output, weights = real(attention, query, key, value, *args, **kwargs)
        i = index_of[id(attention)]
        found[("attention_queries", i)] = query.detach().clone()
        found[("attention_keys", i)] = key.detach().clone()
        found[("attention_values", i)] = value.detach().clone()
        found[("attention_head_outputs", i)] = output.detach().clone()
        found[("attention_probabilities", i)] = weights.detach().clone()
        return output, weights

    module.eager_attention_forward = spy
    try:
        ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            model(ids)
    finally:
        module.eager_attention_forward = real
    return found
