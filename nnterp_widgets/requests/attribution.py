"""Who wrote the answer: direct logit attribution, one request: `Attribution`.

The last position's stream is a sum: the embedding, then each block's attention and MLP
contributions (`layer_input + attention_output + mlp_output == layer_output`), and an
attention contribution is itself a sum over heads, each head's output through its slice
of the output projection, plus that projection's bias. The final norm with its scale
frozen at this run is linear in the stream (plus its own bias), and the unembedding is
linear, so each part's share of logit(answer) - logit(foil) is one dot product, and the
shares add up to the metric::

    attribution = session.attribute("The Eiffel Tower is in the city of", " Paris", " Rome").result()
    attribution.top_heads(3)        # [((layer, head), effect), ...], largest effect first
    attribution.total - attribution.metric   # ~0: the parts add up (float32 rounding)

The frozen norm is found from the norm module itself, not from a formula per family:
two probes ``±v`` give its gain and bias, a constant probe tells whether it centres
(LayerNorm) or not (RMSNorm, Gemma's ``1 + w``), and its output on this run's stream
gives the frozen scale. The unembedding direction is the head's two rows, times the
logits processor's scale.
"""

from __future__ import annotations

from typing import Any

from dataclasses import dataclass

import numpy as np
import torch

from ..engine import module_of
from .sites import InterventionError
from .question import Question, as_given
from .common import Tokens
from .common import check_prompt, one_token, tokens_of
from .tables import table

#: Why a family's heads cannot be split here: their contribution is a norm's output.
POST_NORM = (
    "the attention block's contribution is its post-norm's output (Gemma-2/3, OLMo-2/3), "
    "which is not linear in the heads: per-head direct effects are not served; the "
    "block's total is (attention[layer])"
)
#: Why: no output projection a head's slice can be cut from.
NO_OUT_PROJECTION = "the attention block has no single output projection to cut per-head slices from"
#: Why: under tensor parallelism each worker holds part of the projection and the head.
SPLIT = "split across workers (tensor_parallel_size > 1): attribution runs on one worker only"
#: The final logits go through a softcap (Gemma-2): the metric is taken before it.
SOFTCAP = (
    "the logits are softcapped: the metric (and its parts) is the logit difference before the "
    "softcap; capped_metric is the one after it"
)
POSITION_RANGE = "position {position} is outside this {count}-token prompt: give 0..{last}, or -1 for the last"
SAME_TOKEN = "the answer and the foil are the same token ({text!r}); their logit difference is always 0"
#: Probe size for the norm: large, so the norm's epsilon is negligible (1e-12 relative).
PROBE = 1000.0


@dataclass(frozen=True)
class Attribution:
    """Each part's direct effect on ``metric`` = logit(answer) - logit(foil) (or
    logit(answer) alone) at ``position`` (the last unless asked otherwise).

    ``heads[layer, head]``: the head's output through its slice of the output projection,
    the final norm at this run's scale, the unembedding; NaN on every head where
    ``heads_reason`` says why they cannot be split (then ``attention[layer]`` holds the
    block's total). ``attention_bias[layer]``: the output projection's bias;
    ``attention[layer]``: the whole attention contribution (heads + bias);
    ``mlps[layer]``; ``embedding``: the stream entering block 0; ``norm_bias``: the final
    norm's bias; ``head_bias``: the unembedding's. `total` sums the parts.
    """

    prompt: str
    tokens: Tokens
    answer: int
    answer_text: str
    foil: int | None
    foil_text: str | None
    metric: float
    heads: np.ndarray
    attention_bias: np.ndarray
    attention: np.ndarray
    mlps: np.ndarray
    embedding: float
    norm_bias: float
    head_bias: float
    heads_reason: str | None = None
    note: str | None = None
    capped_metric: float | None = None
    #: The position the metric is read at (what the model predicts after that token).
    position: int = -1

    @property
    def num_layers(self) -> int:
        return int(self.mlps.shape[0])

    @property
    def total(self) -> float:
        """The sum of the parts: equal to ``metric`` up to float32 rounding."""
        return float(self.embedding + self.attention.sum() + self.mlps.sum() + self.norm_bias + self.head_bias)

    @property
    def metric_label(self) -> str:
        if self.foil is None:
            return f"logit({self.answer_text!r})"
        return f"logit({self.answer_text!r}) − logit({self.foil_text!r})"

    def top_heads(self, k: int = 5, sign: int = 0) -> list[tuple[tuple[int, int], float]]:
        """The ``k`` heads of largest effect: by size (``sign=0``), most positive (1) or most negative (-1)."""
        if self.heads_reason is not None:
            return []
        flat = self.heads.ravel()
        key = np.abs(flat) if sign == 0 else sign * flat
        order = np.argsort(-key, kind="stable")[:k]
        width = self.heads.shape[1]
        return [((int(i) // width, int(i) % width), float(flat[i])) for i in order]

    def top_mlps(self, k: int = 5, sign: int = 0) -> list[tuple[int, float]]:
        """The ``k`` MLPs of largest effect, ``[(layer, effect), ...]``: by size (``sign=0``),
        most positive (1) or most negative (-1)."""
        key = np.abs(self.mlps) if sign == 0 else sign * self.mlps
        order = np.argsort(-key, kind="stable")[:k]
        return [(int(i), float(self.mlps[i])) for i in order]

    def to_pandas(self):
        """One row per part of the metric: ``part`` (head, attention bias, MLP, embedding,
        final norm bias, head bias), its ``layer`` and ``head`` (-1 where none) and its
        direct ``effect``; the effects add up to `total`."""
        layers = self.num_layers
        rows = {"part": [], "layer": [], "head": [], "effect": []}

        def row(part, layer, head, effect):
            for name, value in zip(rows, (part, layer, head, float(effect)), strict=True):
                rows[name].append(value)

        row("embedding", -1, -1, self.embedding)
        for layer in range(layers):
            heads = np.asarray(self.heads)
            for head in range(heads.shape[1] if heads.ndim == 2 and self.heads_reason is None else 0):
                row("head", layer, head, heads[layer, head])
            if self.heads_reason is not None:
                row("attention", layer, -1, self.attention[layer])
            else:
                row("attention bias", layer, -1, self.attention_bias[layer])
            row("mlp", layer, -1, self.mlps[layer])
        row("final norm bias", -1, -1, self.norm_bias)
        row("head bias", -1, -1, self.head_bias)
        return table(rows)


def out_projection(attention_module: torch.nn.Module):
    """The attention block's one row-parallel output projection (o_proj, c_proj, dense,
    out_proj: whatever the family calls it), or None."""
    from vllm.model_executor.layers.linear import RowParallelLinear

    found = [m for m in attention_module.children() if isinstance(m, RowParallelLinear)]
    return found[0] if len(found) == 1 else None


def heads_reason(model) -> str | None:
    """Why this engine's heads cannot be split for attribution, or None."""
    for layer in model.layers:
        attention = layer.self_attn
        if attention.unavailable_reason("attention_head_outputs") is not None:
            return attention.unavailable_reason("attention_head_outputs")
        if getattr(attention, "CONTRIBUTION", None) is not None:
            return POST_NORM
        projection = out_projection(module_of(attention))
        if projection is None:
            return NO_OUT_PROJECTION
        if getattr(projection, "tp_size", 1) > 1:
            return SPLIT
    return None


def norm_output(norm: torch.nn.Module, stream: torch.Tensor) -> torch.Tensor:
    """The norm module on one stream vector ``[hidden]``, in the norm's dtype, as float32."""
    weight = next((p for p in norm.parameters()), None)
    dtype = weight.dtype if weight is not None else stream.dtype
    out = norm(stream.to(dtype).unsqueeze(0))
    return (out[0] if isinstance(out, tuple) else out)[0].float()


def frozen_norm(norm: torch.nn.Module, stream: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """The final norm at ``stream``'s scale as ``(gain, bias, centres)``: a part ``c``
    becomes ``gain * (c - mean(c) if centres else c)``, the bias one part of its own.
    Found from the module's outputs on probes, so any RMSNorm or LayerNorm variant works."""

    def run(x: torch.Tensor) -> torch.Tensor:
        return norm_output(norm, x)

    size = stream.shape[-1]
    signs = torch.ones(size, device=stream.device)
    signs[1::2] = -1.0
    probe = PROBE * signs
    plus, minus = run(probe), run(-probe)
    bias = (plus + minus) / 2
    direction = (plus - minus) / 2
    centres = bool((run(torch.full_like(probe, PROBE)) - bias).abs().max() < 1e-3 * direction.abs().max())
    shaped = probe - probe.mean() if centres else probe
    gain = direction * shaped.pow(2).mean().sqrt() / shaped  # the gain at unit scale
    x = stream.float()
    x = x - x.mean() if centres else x
    scaled = gain * x
    out = run(stream.float()) - bias
    scale = (out @ scaled) / (scaled @ scaled)  # the frozen 1 / rms (or 1 / std) of this run
    return gain * scale, bias, centres


def per_head(projection: torch.nn.Module, outputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``[..., heads, head_dim]`` head outputs -> each head's share of the projection's
    output ``[..., heads, hidden]`` and its bias. Run through the module itself (one row
    per head, the other heads zeroed, and an all-zero row for the bias), since the CPU
    backend repacks a linear layer's weight for its own kernel."""
    *lead, count, size = outputs.shape
    flat = outputs.reshape(-1, count, size)
    rows = torch.zeros(len(flat), count, count, size, dtype=outputs.dtype, device=outputs.device)
    diagonal = torch.arange(count, device=outputs.device)
    rows[:, diagonal, diagonal] = flat
    rows = torch.cat([rows.reshape(-1, count * size), rows.new_zeros(1, count * size)])
    result = projection(rows)
    separate = None
    if isinstance(result, tuple):
        result, separate = result[0], result[1]
    result = result.float()
    base = result[-1]  # the bias, where the module adds it
    bias = separate.float() if separate is not None else base
    return (result[:-1] - base).reshape(*lead, count, -1), bias


def direct_effects(model, answer: int, foil: int | None, split_heads: bool, out: dict, position: int = -1) -> None:
    """Inside a trace: read each part at ``position`` (the last by default) and reduce it
    to its effect on the metric the lens reads there."""
    head_module = model.unembedding()
    unembed = head_module.weight
    processor = module_of(model.logits_processor)
    scale = float(getattr(processor, "scale", 1.0) or 1.0)
    direction = unembed[answer].float() - (unembed[foil].float() if foil is not None else 0.0)
    direction = direction * scale
    head_bias = getattr(head_module, "bias", None) if model.family.head_bias else None
    out["head_bias"] = (
        0.0
        if head_bias is None
        else float(scale * (head_bias[answer].float() - (head_bias[foil].float() if foil is not None else 0.0)))
    )
    parts = [model.layers[0].layer_input[0, position].float()]
    heads, biases = [], []
    for layer in model.layers:
        attention = layer.self_attn
        if split_heads:
            contributions, bias = per_head(
                out_projection(module_of(attention)), attention.attention_head_outputs[0, position]
            )
            heads.append(contributions)
            biases.append(bias if bias is not None else torch.zeros_like(parts[0]))
        parts.append(attention.attention_output[0, position].float())
        parts.append(layer.mlp.mlp_output[0, position].float())
    stream = model.layers[-1].layer_output[0, position].float()
    gain, bias, centres = frozen_norm(module_of(model.norm), stream)
    out["norm_bias"] = float(bias @ direction)
    # The model's own logits at the last position; elsewhere the lens of the last stream
    # there (the final norm and the logits processor: what the logits would be).
    logits = (model.logits[0, -1] if position == -1 else model.project_on_vocab(stream.unsqueeze(0))[0]).float()
    out["capped"] = float(logits[answer] - (logits[foil] if foil is not None else 0.0))
    # Before any softcap: the final norm's output on the unembedding direction.
    normed = norm_output(module_of(model.norm), stream)
    out["metric"] = float(normed @ direction) + out["head_bias"]
    if split_heads:
        parts = parts + list(torch.cat(heads)) + biases
    rows = torch.stack(parts)
    if centres:
        rows = rows - rows.mean(-1, keepdim=True)
    out["effects"] = ((rows * gain) @ direction).cpu()


def attribution_plan(model, prompt: Any, answer, foil=None, position: int = -1) -> tuple[list[int], tuple, tuple]:
    """The attribution's checks, before any trace: ``(ids, reads_args, build_args)`` for
    `attribution_reads` (inside the prompt's invoke) and `attribution_result` (after)."""
    ids = check_prompt(model, prompt)
    if isinstance(position, bool) or not isinstance(position, int) or not -len(ids) <= position < len(ids):
        raise InterventionError(POSITION_RANGE.format(position=position, count=len(ids), last=len(ids) - 1))
    position = position - len(ids) if position >= 0 else position  # -1 is the last: its logits are served
    answer_id, answer_text = one_token(model, answer, "answer", InterventionError)
    foil_id, foil_text = one_token(model, foil, "foil", InterventionError) if foil is not None else (None, None)
    if foil_id == answer_id:
        raise InterventionError(SAME_TOKEN.format(text=answer_text))
    reason = heads_reason(model)
    reads = (answer_id, foil_id, reason is None, position)
    return ids, reads, (prompt, (answer_id, answer_text), (foil_id, foil_text), reason, position)


def attribution_reads(model, answer: int, foil: int | None, split_heads: bool, position: int) -> dict:
    """Inside the prompt's invoke: the ids and every part's effect (`direct_effects`)."""
    out = {"input_ids": model.input_ids[0].cpu()}
    direct_effects(model, answer, foil, split_heads, out, position)
    return out


def attribution_result(model, ids, out: dict, prompt, answer, foil, reason, position: int) -> Attribution:
    """The `Attribution` from `attribution_reads`' answer."""
    (answer_id, answer_text), (foil_id, foil_text) = answer, foil
    layers, heads = model.num_layers, model.num_heads
    softcap = getattr(module_of(model.logits_processor), "soft_cap", None)
    metric, capped = float(out["metric"]), float(out["capped"])
    effects = out["effects"].double().numpy()
    embedding, blocks = float(effects[0]), effects[1 : 1 + 2 * layers].reshape(layers, 2)
    if reason is None:
        head_grid = effects[1 + 2 * layers : 1 + 2 * layers + layers * heads].reshape(layers, heads)
        bias = effects[1 + 2 * layers + layers * heads :]
    else:
        head_grid, bias = np.full((layers, heads), np.nan), np.zeros(layers)
    return Attribution(
        prompt=prompt,
        tokens=tokens_of(model, out["input_ids"]),
        answer=answer_id,
        answer_text=answer_text,
        foil=foil_id,
        foil_text=foil_text,
        metric=metric,
        heads=_frozen(head_grid),
        attention_bias=_frozen(bias),
        attention=_frozen(blocks[:, 0]),
        mlps=_frozen(blocks[:, 1]),
        embedding=embedding,
        norm_bias=float(out["norm_bias"]),
        head_bias=float(out["head_bias"]),
        heads_reason=reason,
        note=SOFTCAP if softcap else None,
        capped_metric=capped,
        position=len(ids) + position,
    )


#: ``session.each(prompts)``'s question (`run_each`).
ATTRIBUTION_QUESTION = Question("attribute", attribution_reads, attribution_result, as_given)


def attribute(model, prompt: str, answer, foil=None, position: int = -1) -> Attribution:
    """One request: the direct effect of every head, MLP and bias on the metric.

    Args:
        model: the `StandardizedVLLM`.
        prompt: the prompt (text or token ids).
        answer: a token's id or one token's text.
        foil: another token (the metric is then logit(answer) - logit(foil)), or None.
        position: where the metric is read (the last position by default; negative counts
            from the end): what the model predicts after that token.

    Returns:
        An `Attribution` whose parts add up to its metric.
    """
    ids, reads, build = attribution_plan(model, prompt, answer, foil, position)
    reader = model.reader()
    with model.trace(ids, temperature=0.0, max_tokens=1):
        out = attribution_reads(reader, *reads).save()
    return attribution_result(model, ids, out, *build)


def _frozen(array: np.ndarray) -> np.ndarray:
    array = np.ascontiguousarray(array, dtype=np.float64)
    array.setflags(write=False)
    return array
