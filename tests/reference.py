"""The independent reference: the same tiny checkpoint in transformers, float32.

It runs on the tests' device (`devices`: the CPU, or the GPU of the GPU run), so it
is compared with the engine's values on the device they come back on.

`reference_values` runs one prompt and returns, per standard name, what transformers
computes at the corresponding place, read with plain forward hooks — nothing here
touches vLLM or nnsight. Where a family's values are in transformers is the family's
own declaration (`Family.reference`, an `HFNames`). `reference_attention` captures
what each layer's attention computes inside (queries, keys, values, head outputs,
probabilities), by the route each transformers implementation allows (`HFNames.interior`).

Eager attention everywhere, except where transformers' eager path is itself wrong
(`HFNames.implementation`), and with transformers' own modules, except where vLLM
computes a different function on purpose (`HFNames.patch`).
"""

from __future__ import annotations

import math
import sys
from functools import lru_cache
from typing import Callable

import torch

import devices
from nnterp_widgets.families.vllm import family_for
from nnterp_widgets.families.vllm.testing import HFNames


def assert_close_per_token(got: torch.Tensor, want: torch.Tensor, what, tolerance: float = 1e-4) -> None:
    """``tolerance`` (the CPU suite's 1e-4 by default), scaled per token by that token's
    largest value.

    A trained model's first token carries massive activations (hundreds, where other
    tokens' are near 1): float32 rounding there is relative to that size, so a small
    entry of that token's row is off by more than 1e-4 while every row is exact to
    1e-4 of its own scale."""
    got, want = got.float().cpu(), want.float().cpu()
    if got.dim() < 2:
        torch.testing.assert_close(got, want, atol=tolerance, rtol=tolerance, msg=lambda m: f"{what}: {m}")
        return
    scale = want.abs().amax(dim=-1, keepdim=True).clamp(min=1.0)
    error = ((got - want).abs() / scale).max().item()
    assert error <= tolerance, f"{what}: off by {error:.3g} of its token's largest value"


def names_of(family: str) -> HFNames:
    """Where ``family``'s values are in transformers, as the family declares it."""
    return family_for(family).reference


@lru_cache(maxsize=None)
def hf_model(path: str, implementation: str = "eager", dtype: torch.dtype = torch.float32):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = (
        AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation=implementation)
        .eval()
        .to(devices.DEVICE)
    )
    return model, AutoTokenizer.from_pretrained(path)


@lru_cache(maxsize=None)
def hf_reference(path: str, family: str, dtype: torch.dtype = torch.float32):
    """The family's reference model: its attention implementation, its patch; float32
    unless ``dtype`` says otherwise (a bfloat16-only engine's same-dtype reference)."""
    names = names_of(family)
    if names.patch is None:
        return hf_model(path, names.implementation, dtype)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation=names.implementation).eval()
    names.patch(model)
    model.to(devices.DEVICE)
    return model, AutoTokenizer.from_pretrained(path)


def _get(module: torch.nn.Module, dotted: str) -> torch.nn.Module:
    for part in dotted.split("."):
        module = module[int(part)] if part.isdigit() else getattr(module, part)
    return module


def _find(module: torch.nn.Module, dotted: str | None) -> torch.nn.Module | None:
    if dotted is None:
        return None
    try:
        return _get(module, dotted)
    except (AttributeError, IndexError):
        return None


def reference_values(
    path: str,
    family: str,
    prompt: str | list[int],
    edit: Callable[[int, torch.Tensor], torch.Tensor] | None = None,
    dtype: torch.dtype = torch.float32,
) -> dict:
    """Standard values of ``prompt`` (text, or token ids) in transformers, each ``[1, tokens, ...]``,
    computed in ``dtype`` (float32 unless a bfloat16-only engine is held to its own dtype).

    ``token_embeddings`` is the embedding lookup (the table's rows for the ids), which
    is what the engine serves; a family that scales it (Gemma) scales it after, so
    its stream, ``layer_input`` of block 0, differs from it.

    ``edit(layer_index, layer_output) -> new layer_output`` is applied to each block's
    output stream, to check that an edit on the engine has the same effect.
    """
    model, tokenizer = hf_reference(path, family, dtype)
    names = names_of(family)
    if isinstance(prompt, str):
        ids = tokenizer(prompt, return_tensors="pt")["input_ids"].to(devices.DEVICE)
    else:
        ids = torch.tensor([list(prompt)], device=devices.DEVICE)
    embed = _get(model, names.embed)
    found: dict = {
        "input_ids": ids,
        "token_embeddings": torch.nn.functional.embedding(ids, embed.weight).detach().clone(),
    }
    handles = []

    def keep(key, value):
        found[key] = value.detach().clone()

    def first(value):
        return value[0] if isinstance(value, tuple) else value

    layers = _get(model, names.layers)
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
        attention = _get(layer, names.attention_out or names.attention)
        handles.append(
            attention.register_forward_hook(lambda m, a, o, index=index: keep(("attention_output", index), first(o)))
        )
        handles.append(
            _get(layer, names.mlp_out or names.mlp).register_forward_hook(
                lambda m, a, o, index=index: keep(("mlp_output", index), first(o))
            )
        )
        down = _find(_get(layer, names.mlp), names.down)
        if down is not None:
            handles.append(down.register_forward_pre_hook(lambda m, a, index=index: keep(("mlp_neurons", index), a[0])))
    try:
        with torch.no_grad():
            logits = model(ids).logits
    finally:
        for handle in handles:
            handle.remove()
    found["logits"] = logits[:, -1:].clone()
    found["next_token_probs"] = torch.softmax(logits[:, -1], dim=-1)
    return found


def _record(found, i, query, key, value, head_outputs, probabilities):
    found[("attention_queries", i)] = query.detach().float().clone()
    found[("attention_keys", i)] = key.detach().float().clone()
    found[("attention_values", i)] = value.detach().float().clone()
    found[("attention_head_outputs", i)] = head_outputs.detach().float().clone()
    found[("attention_probabilities", i)] = probabilities.detach().float().clone()


def reference_attention(path: str, family: str, prompt: str) -> dict:
    """Per layer, what transformers' attention sees and returns.

    ``{(name, layer): tensor}`` for queries/keys/values ``[1, heads, tokens, head_dim]``
    (after rotary and any q/k norm; keys and values with kv heads, before repeat),
    head outputs ``[1, tokens, heads, head_dim]`` and probabilities
    ``[1, heads, query, key]``.
    """
    model, tokenizer = hf_reference(path, family)
    names = names_of(family)
    layers = _get(model, names.layers)
    attentions = [_get(layer, names.attention) for layer in layers]
    index_of = {id(attention): i for i, attention in enumerate(attentions)}
    ids = tokenizer(prompt, return_tensors="pt")["input_ids"].to(devices.DEVICE)
    found: dict = {}
    capture = {"eager": _capture_eager, "gptj": _capture_gptj, "sdpa": _capture_sdpa, "fused": _capture_fused}[
        names.interior
    ]
    with capture(names, attentions, index_of, found):
        with torch.no_grad():
            model(ids)
    return found


class _Capture:
    def __init__(self, enter, exit):
        self._enter, self._exit = enter, exit

    def __enter__(self):
        self._enter()

    def __exit__(self, *exc):
        self._exit()


def _capture_eager(names, attentions, index_of, found):
    # The modeling module's eager_attention_forward: it gets q/k/v after rotary and
    # returns the heads' outputs and the softmaxed weights (softcap, window, GQA).
    module = sys.modules[type(attentions[0]).__module__]
    real = module.eager_attention_forward

    def spy(attention, query, key, value, *args, **kwargs):
        output, weights = real(attention, query, key, value, *args, **kwargs)
        _record(found, index_of[id(attention)], query, key, value, output, weights)
        return output, weights

    def enter():
        module.eager_attention_forward = spy

    def exit():
        module.eager_attention_forward = real

    return _Capture(enter, exit)


def _capture_gptj(names, attentions, index_of, found):
    # GPT-J has no attention interface: its `_attn(query, key, value, mask)` gets q/k
    # after the partial rotary and returns ([batch, heads, tokens, head_dim], weights).
    def wrap(attention):
        real = attention._attn

        def spy(query, key, value, *args, **kwargs):
            output, weights = real(query, key, value, *args, **kwargs)
            _record(found, index_of[id(attention)], query, key, value, output.transpose(1, 2), weights)
            return output, weights

        return spy

    def enter():
        for attention in attentions:
            attention._attn = wrap(attention)

    def exit():
        for attention in attentions:
            del attention._attn

    return _Capture(enter, exit)


def _capture_sdpa(names, attentions, index_of, found):
    # SDPA returns no weights. The pattern is recomputed here, independently of the
    # engine, from the very q, k and additive mask transformers hands SDPA (Falcon's
    # mask carries its ALiBi bias): softmax(q k^T * scale + mask), SDPA's definition.
    functional = torch.nn.functional
    real = functional.scaled_dot_product_attention
    calls: list = []

    def spy(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kwargs):
        output = real(
            query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale, **kwargs
        )
        scale_ = scale if scale is not None else 1 / math.sqrt(query.shape[-1])
        heads, kv_heads = query.shape[1], key.shape[1]
        keys = key.repeat_interleave(heads // kv_heads, dim=1)
        scores = (query.double() @ keys.double().transpose(-1, -2)) * scale_
        tokens = query.shape[-2]
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                scores = scores.masked_fill(~attn_mask, float("-inf"))
            else:
                scores = scores + attn_mask.double()
        if is_causal:
            upper = torch.triu(torch.ones(tokens, tokens, dtype=torch.bool, device=scores.device), diagonal=1)
            scores = scores.masked_fill(upper, float("-inf"))
        calls.append((query, key, value, output.transpose(1, 2), torch.softmax(scores, dim=-1)))
        return output

    def enter():
        functional.scaled_dot_product_attention = spy

    def exit():
        functional.scaled_dot_product_attention = real
        assert len(calls) == len(attentions), "one SDPA call per layer expected"
        for i, call in enumerate(calls):  # layers run in order, one call each
            _record(found, i, *call)

    return _Capture(enter, exit)


def _capture_fused(names, attentions, index_of, found):
    # Bloom, MPT: no attention interface. q/k/v are the fused projection's output split
    # by the model's own rule, the weights are what the attention returns, the heads'
    # outputs the output projection's input.
    handles: list = []
    parts: dict = {}

    def enter():
        for attention in attentions:
            i = index_of[id(attention)]

            def on_qkv(module, args, output, i=i, attention=attention):
                parts[i] = names.split(attention, output)

            def on_out(module, args, i=i, attention=attention):
                merged = args[0]
                parts[(i, "heads")] = merged.reshape(*merged.shape[:2], len(parts[i][0][0]), -1)

            def on_attention(module, args, kwargs, output, i=i):
                query, key, value = parts[i]
                _record(found, i, query, key, value, parts[(i, "heads")], output[1])

            handles.append(_get(attention, names.qkv_proj).register_forward_hook(on_qkv))
            handles.append(_get(attention, names.out_proj).register_forward_pre_hook(on_out))
            handles.append(attention.register_forward_hook(on_attention, with_kwargs=True))

    def exit():
        for handle in handles:
            handle.remove()

    return _Capture(enter, exit)


#: Where transformers keeps a block's attention output projection and the final norm.
OUT_PROJECTIONS = ("o_proj", "c_proj", "dense", "out_proj")
FINAL_NORMS = (
    "model.norm",
    "model.final_layernorm",
    "transformer.ln_f",
    "transformer.norm_f",
    "gpt_neox.final_layer_norm",
)


def _linear_weight(module: torch.nn.Module) -> torch.Tensor:
    """``[out, in]`` whatever the layer's class (GPT-2's Conv1D stores ``[in, out]``)."""
    weight = module.weight
    return weight.t() if type(module).__name__ == "Conv1D" else weight


def reference_attribution(
    path: str, family: str, prompt: str, answer: int, foil: int | None, position: int = -1
) -> dict:
    """Direct logit attribution in transformers, written from the textbook formulas:
    each head's output through its columns of the output projection's weight, then the
    final norm (RMSNorm, Gemma's ``1 + w``, or LayerNorm) with its scale computed from
    the final stream and the norm's own epsilon, then the unembedding rows' difference.

    Returns ``{"heads": [layers, heads], "mlps": [layers], "attention": [layers],
    "embedding": float, "metric": float}`` (float64 numpy).
    """
    import numpy as np

    model, _ = hf_reference(path, family)
    names = names_of(family)
    values = reference_values(path, family, prompt)
    interior = reference_attention(path, family, prompt)
    layers = _get(model, names.layers)
    norm = next(module for module in map(lambda n: _find(model, n), FINAL_NORMS) if module is not None)
    unembed = model.get_output_embeddings().weight.detach().double()
    direction = unembed[answer] - (unembed[foil] if foil is not None else 0.0)
    final = values[("layer_output", len(layers) - 1)][0, position].double()
    centres = isinstance(norm, torch.nn.LayerNorm)
    eps = norm.eps if centres else getattr(norm, "variance_epsilon", getattr(norm, "eps", None))
    gain = norm.weight.detach().double() + (1.0 if type(norm).__name__.startswith("Gemma") else 0.0)
    shaped = final - final.mean() if centres else final
    scale = 1.0 / torch.sqrt(shaped.pow(2).mean() + eps)

    def effect(part: torch.Tensor) -> float:
        part = part.double()
        part = part - part.mean(-1, keepdim=True) if centres else part
        return (part * gain * scale) @ direction

    heads, mlps, attention = [], [], []
    for index, layer in enumerate(layers):
        block = _get(layer, names.attention)
        projection = next(
            getattr(block, n) for n in OUT_PROJECTIONS if isinstance(getattr(block, n, None), torch.nn.Module)
        )
        weight = _linear_weight(projection).detach().double()
        outputs = interior[("attention_head_outputs", index)][0, position].double()  # [heads, head_dim]
        count, size = outputs.shape
        per_head = torch.einsum("ohd,hd->ho", weight.reshape(weight.shape[0], count, size), outputs)
        heads.append(effect(per_head).cpu().numpy())
        attention.append(float(effect(values[("attention_output", index)][0, position])))
        mlps.append(float(effect(values[("mlp_output", index)][0, position])))
    if position == -1:
        logits = values["logits"][0, -1].double()
    else:  # the engine serves the last position's logits only; transformers' at this one
        with torch.no_grad():
            logits = model(values["input_ids"]).logits[0, position].double()
    metric = logits[answer] - (logits[foil] if foil is not None else 0.0)
    return {
        "heads": np.stack(heads),
        "mlps": np.array(mlps),
        "attention": np.array(attention),
        "embedding": float(effect(values[("layer_input", 0)][0, position])),
        "metric": float(metric),
    }


def reference_contributions(path: str, family: str, prompt: str) -> dict:
    """The contribution graph's shares in transformers, from the formulas (float64):
    per block, ``z[i, j] = sum_h A_h[i, j] * W_O[:, h] v_h[j]`` from the captured pattern
    and values and the output projection's weight, the stream, the block's attention and
    MLP outputs, and each part's share ``max(0, |y|_1 - |y - c|_1)`` normalised over the
    parts of its sum.

    Returns ``{"attention": [layers, query, key], "residual", "bias", "through", "mlp":
    [layers, tokens]}`` (float64 numpy).
    """

    model, _ = hf_reference(path, family)
    names = names_of(family)
    values = reference_values(path, family, prompt)
    interior = reference_attention(path, family, prompt)

    def shares(whole: torch.Tensor, parts: torch.Tensor) -> torch.Tensor:
        proximity = (whole.abs().sum(-1, keepdim=True) - (whole.unsqueeze(-2) - parts).abs().sum(-1)).clamp_min(0)
        return torch.nan_to_num(proximity / proximity.sum(-1, keepdim=True))  # parts that cancel: 0

    found = {k: [] for k in ("attention", "residual", "bias", "through", "mlp")}
    for index, layer in enumerate(_get(model, names.layers)):
        block = _get(layer, names.attention)
        projection = next(
            getattr(block, n) for n in OUT_PROJECTIONS if isinstance(getattr(block, n, None), torch.nn.Module)
        )
        weight = _linear_weight(projection).detach().double()
        bias = projection.bias.detach().double() if projection.bias is not None else weight.new_zeros(weight.shape[0])
        value = interior[("attention_values", index)][0].double()  # [kv_heads, tokens, head_dim]
        pattern = interior[("attention_probabilities", index)][0].double()  # [heads, query, key]
        heads = pattern.shape[0]
        value = value.repeat_interleave(heads // value.shape[0], dim=0)
        messages = torch.einsum("ohd,hkd->kho", weight.reshape(weight.shape[0], heads, -1), value)
        sent = torch.einsum("hqk,kho->qko", pattern, messages)
        stream = values[("layer_input", index)][0].double()
        attention = values[("attention_output", index)][0].double()
        mlp = values[("mlp_output", index)][0].double()
        tokens = stream.shape[0]
        parts = torch.cat([stream[:, None], bias.expand(tokens, 1, -1), sent], dim=1)
        step = shares(stream + attention, parts)
        found["residual"].append(step[:, 0])
        found["bias"].append(step[:, 1])
        found["attention"].append(step[:, 2:])
        last = shares(stream + attention + mlp, torch.stack([stream + attention, mlp], dim=1))
        found["through"].append(last[:, 0])
        found["mlp"].append(last[:, 1])
    return {name: torch.stack(parts).cpu().numpy() for name, parts in found.items()}
