"""One engine request per prompt: every panel's data from a single trace.

The trace reads, in execution order, every served standard value (summarised in the
worker to shape, dtype, stats and a small preview, so a long prompt does not ship
whole activations home), each layer's prefill pattern and each layer's logit lens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .panels import LensPanel, PromptResult, Tokens, ValueSummary

#: Rows (token positions) and columns of a value's preview.
PREVIEW_ROWS = 32
PREVIEW_COLS = 16
#: Top-k of each lens cell (hover) and of the model's own prediction.
LENS_K = 5

#: Standard values in execution order: (host, name, token axis).
ROOT_BEFORE = (("input_ids", 1), ("input_size", 0), ("token_embeddings", 1))
LAYER_ORDER = (
    ("", "layer_input", 1),
    ("self_attn", "attention_queries", 2),
    ("self_attn", "attention_keys", 2),
    ("self_attn", "attention_values", 2),
    ("self_attn", "attention_scores", 2),
    ("self_attn", "attention_probabilities", 2),
    ("self_attn", "attention_head_outputs", 1),
    ("self_attn", "attention_output", 1),
    ("mlp", "mlp_neurons", 1),
    ("mlp", "mlp_activation", 1),
    ("mlp", "mlp_output", 1),
    ("", "layer_output", 1),
)
ROOT_AFTER = (("logits", 1), ("next_token_probs", 0))


class ProbeError(ValueError):
    """A prompt the engine cannot take (empty, too long): said before any request."""


@dataclass(frozen=True)
class Read:
    """One value the probe reads: its host envoy, name and the axis holding tokens."""

    host: Any
    name: str
    axis: int

    @property
    def id(self) -> str:
        return f"{self.host.path}.{self.name}"


def plan(model) -> tuple[list[Read], list[list[Read]], list[Read]]:
    """The served values a probe reads: before the layers, per layer, after."""

    def served(host, name, axis):
        return [Read(host, name, axis)] if host.unavailable_reason(name) is None else []

    before = [r for name, axis in ROOT_BEFORE for r in served(model, name, axis)]
    layers = []
    for layer in model.layers:
        reads = []
        for child, name, axis in LAYER_ORDER:
            host = getattr(layer, child) if child else layer
            reads.extend(served(host, name, axis))
        layers.append(reads)
    after = [r for name, axis in ROOT_AFTER for r in served(model, name, axis)]
    return before, layers, after


def summarize(value: Any, axis: int, rows: int = PREVIEW_ROWS, cols: int = PREVIEW_COLS) -> dict:
    """Shape, dtype, stats and a ``[rows, cols]`` preview (token positions on the rows).

    Runs in the engine's worker, inside the trace.
    """
    if isinstance(value, torch.Size):
        return {"shape": [len(value)], "dtype": "torch.Size", "stats": {}, "preview": torch.tensor([list(value)], dtype=torch.float32), "rows": [0], "total": len(value)}
    tensor = value.detach()
    as_float = tensor.float()
    finite = as_float[torch.isfinite(as_float)]
    stats = {
        "min": float(finite.min()) if finite.numel() else None,
        "max": float(finite.max()) if finite.numel() else None,
        "mean": float(finite.mean()) if finite.numel() else None,
        "norm": float(finite.norm()) if finite.numel() else None,
    }
    flat = as_float.squeeze(0) if as_float.dim() > 1 and as_float.shape[0] == 1 and axis > 0 else as_float
    token_axis = axis - 1 if flat.dim() < as_float.dim() else axis
    if flat.dim() == 1:
        flat = flat.unsqueeze(-1) if token_axis == 0 else flat.unsqueeze(0)
    else:
        flat = flat.movedim(token_axis, 0).reshape(flat.shape[token_axis], -1)
    positions = flat.shape[0]
    keep = list(range(min(rows, positions)))
    if positions > rows:  # the first rows and the last one, which is the one predicting
        keep = keep[:-1] + [positions - 1]
    preview = flat[keep, :cols].masked_fill(~torch.isfinite(flat[keep, :cols]), 0.0)
    return {
        "shape": list(tensor.shape),
        "dtype": str(tensor.dtype).replace("torch.", ""),
        "stats": stats,
        "preview": preview.contiguous(),
        "rows": keep,
        "total": int(flat.shape[1]),
    }


def check_prompt(model, prompt: str) -> list[int]:
    """The prompt's token ids; a clear `ProbeError` for one the engine cannot take."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise ProbeError("the prompt is empty: type some text to explore")
    ids = model.tokenizer(prompt)["input_ids"]
    limit = model.max_model_len
    if limit is not None and len(ids) >= limit:
        raise ProbeError(
            f"the prompt is {len(ids)} tokens, and this engine takes at most {limit - 1} "
            f"(max_model_len={limit}, less the token it predicts)"
        )
    return ids


def probe(model, prompt: str, k: int = LENS_K) -> PromptResult:
    """Run one trace on ``prompt`` and build every panel's data from it."""
    check_prompt(model, prompt)
    before, layers, after = plan(model)
    with model.trace(prompt, temperature=0.0, max_tokens=1):
        out = dict().save()
        out["values"] = {}
        out["lens"] = []
        out["patterns"] = {}
        for read in before:
            value = getattr(read.host, read.name)
            if read.name == "input_ids":
                out["input_ids"] = value[0].tolist()
            out["values"][read.id] = summarize(value, read.axis)
        for index, reads in enumerate(layers):
            for read in reads:
                value = getattr(read.host, read.name)
                if read.name == "attention_probabilities":
                    out["patterns"][index] = value[0].float()
                out["values"][read.id] = summarize(value, read.axis)
            stream = model.layers[index].layer_output
            top = torch.softmax(model.project_on_vocab(stream).float(), dim=-1)[0].topk(k, dim=-1)
            out["lens"].append((top.values, top.indices))
        for read in after:
            value = getattr(read.host, read.name)
            if read.name == "logits":
                top = torch.softmax(value[0, -1].float(), dim=-1).topk(k)
                out["model_top"] = (top.values, top.indices)
            out["values"][read.id] = summarize(value, read.axis)
    return _result(model, prompt, out)


def _result(model, prompt: str, out: dict) -> PromptResult:
    tokenizer = model.tokenizer
    ids = tuple(int(i) for i in out["input_ids"])
    tokens = Tokens(ids, tuple(tokenizer.decode([i]) for i in ids))
    probs = np.stack([p.numpy() for p, _ in out["lens"]]).astype(np.float32)
    top_ids = np.stack([i.numpy() for _, i in out["lens"]]).astype(np.int64)
    decode = {}
    def text(i):
        if i not in decode:
            decode[i] = tokenizer.decode([i])
        return decode[i]
    top_texts = tuple(tuple(tuple(text(int(i)) for i in cell) for cell in row) for row in top_ids)
    model_probs, model_ids = out["model_top"]
    lens = LensPanel(tokens, top_ids, probs, top_texts, model_ids.numpy().astype(np.int64),
                     model_probs.numpy().astype(np.float32))
    values = {
        key: ValueSummary(
            id=key,
            shape=tuple(found["shape"]),
            dtype=found["dtype"],
            stats=found["stats"],
            preview=found["preview"].numpy().astype(np.float32),
            row_tokens=tuple(found["rows"]),
            total_cols=found["total"],
        )
        for key, found in out["values"].items()
    }
    patterns = {layer: p.numpy().astype(np.float32) for layer, p in out["patterns"].items()}
    return PromptResult(prompt, tokens, lens, patterns, values)
