"""One standard value, summarised for the module tree's preview: `ValueSummary`, `run_value`.

summary = run_value(model, text, "model.model.layers.0.mlp.mlp_output")
summary.shape, summary.stats["max"], summary.preview   # [rows, cols] float32
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from .question import Question, as_given
from .common import (
    BEFORE_HEAD_OUTPUTS,
    MAX_RESULT_BYTES,
    RequestRefused,
    ablate_block,
    checked,
    check_size,
    described,
    to_numpy,
)
from .tables import cells


@dataclass(frozen=True)
class ValueSummary:
    """One standard value for a prompt, as the module tree previews it.

    ``preview`` is a small ``[rows, cols]`` float32 slice with token positions on the
    rows (``row_tokens`` says which), enough to see a value without shipping it whole.
    """

    id: str
    shape: tuple[int, ...]
    dtype: str
    stats: dict
    preview: np.ndarray
    row_tokens: tuple[int, ...]
    total_cols: int
    #: With ``full=True``: the whole value as a CPU torch tensor (its own dtype), else None.
    tensor: Any = None

    def to_pandas(self):
        """One row per (position, feature): the whole value's cells where it came with
        ``full=True`` (a leading batch axis of 1 dropped; further axes flattened into
        ``feature``), else the preview's (``row_tokens`` its positions)."""
        if self.tensor is not None:
            whole = self.tensor.float().numpy()
            whole = whole[0] if whole.ndim > 1 and whole.shape[0] == 1 else whole
            whole = whole.reshape(whole.shape[0], -1) if whole.ndim > 1 else whole.reshape(-1, 1)
            return cells({"position": range(whole.shape[0]), "feature": range(whole.shape[1])}, {"value": whole})
        rows, cols = np.shape(self.preview)
        return cells({"position": self.row_tokens[:rows], "feature": range(cols)}, {"value": self.preview})


#: Rows (token positions) and columns of a value's preview.
PREVIEW_ROWS = 32


PREVIEW_COLS = 16


def summarize(value: Any, axis: int | None, rows: int = PREVIEW_ROWS, cols: int = PREVIEW_COLS) -> dict:
    """Shape, dtype, stats and a ``[rows, cols]`` preview (token positions on the rows), on the CPU."""
    if isinstance(value, torch.Size):
        return {
            "shape": [len(value)],
            "dtype": "torch.Size",
            "stats": {},
            "preview": torch.tensor([list(value)], dtype=torch.float32),
            "rows": [0],
            "total": len(value),
        }
    tensor = value.detach()
    as_float = tensor.float()
    finite = as_float[torch.isfinite(as_float)]
    stats = {
        "min": float(finite.min()) if finite.numel() else None,
        "max": float(finite.max()) if finite.numel() else None,
        "mean": float(finite.mean()) if finite.numel() else None,
        "norm": float(finite.norm()) if finite.numel() else None,
    }
    axis = 0 if axis is None else axis
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
        "preview": preview.contiguous().cpu(),
        "rows": keep,
        "total": int(flat.shape[1]),
    }


def run_value(
    model,
    prompt: Any,
    value_id: str,
    *,
    ablate: Sequence = (),
    max_bytes: int = MAX_RESULT_BYTES,
    full: bool = False,
) -> ValueSummary:
    """A summary of one standard value (``model.model.layers.0.mlp.mlp_output``) for
    ``prompt``; with ``full``, the whole value too (``tensor``), its size checked first."""
    ids, heads = checked(model, prompt, ablate)
    found = {value.id: value for value in described(model)}
    value = found.get(value_id)
    if value is None:
        raise RequestRefused(f"no standard value {value_id!r} on this model")
    if not value.available:
        raise RequestRefused(f"{value.standard_path} is not served on this engine: {value.reason}")
    check_size(PREVIEW_ROWS * PREVIEW_COLS * 4, max_bytes, "ask for a smaller preview")
    if full:
        check_size(value_bytes(model, value_id, len(ids)), max_bytes, "shorten the prompt")
    host, name, axis = value.host(model), value.name, value.token_axis
    # Blocks ablated before the read: those before the value's own, and its own too
    # where the value comes after the heads' outputs (root values: every block).
    if value.layer is None:
        before = model.num_layers if name in ("logits", "next_token_probs") else 0
    else:
        before = value.layer + (name not in BEFORE_HEAD_OUTPUTS)
    with model.trace(ids, temperature=0.0, max_tokens=1):
        out = dict().save()
        for index in range(before):
            ablate_block(model, heads, index)
        read = getattr(host, name)
        out["summary"] = summarize(read, axis)
        if full:
            out["tensor"] = read.detach().cpu()
    found = out["summary"]
    return ValueSummary(
        id=value_id,
        shape=tuple(found["shape"]),
        dtype=found["dtype"],
        stats=found["stats"],
        preview=to_numpy(found["preview"], np.float32),
        row_tokens=tuple(found["rows"]),
        total_cols=found["total"],
        tensor=out["tensor"] if full else None,
    )


def value_bytes(model, value_id: str, tokens: int) -> int:
    """What a whole value weighs for a ``tokens``-token prompt (its shape in the engine's
    description, 4 bytes a number; 0 where its shape is not known)."""
    shape = {value.id: value.shape for value in described(model, tokens)}.get(value_id)
    return int(np.prod(shape)) * 4 if shape else 0


#: How a batch reduces a value over a prompt's tokens: its last token's, or their mean.
REDUCE = ("last", "mean")


UNKNOWN_REDUCE = "reduce is how a value becomes one vector per prompt: {choices}; got {reduce!r}"


NO_TOKEN_AXIS = "{value} has no token axis to reduce over: ask for it with session.value, one prompt at a time"


def check_reduce(reduce: str) -> str:
    if reduce not in REDUCE:
        raise RequestRefused(UNKNOWN_REDUCE.format(choices=", ".join(REDUCE), reduce=reduce))
    return reduce


def vector_plan(model, prompt: Any, value_id: str, reduce: str = "last") -> tuple[list[int], tuple, tuple]:
    """A value reduced to one vector: the checks, before any trace, as ``(ids,
    reads_args, build_args)`` for `vector_reads` and `vector_result`."""
    check_reduce(reduce)
    ids, _ = checked(model, prompt, ())
    value = {value.id: value for value in described(model)}.get(value_id)
    if value is None:
        raise RequestRefused(f"no standard value {value_id!r} on this model")
    if not value.available:
        raise RequestRefused(f"{value.standard_path} is not served on this engine: {value.reason}")
    if value.token_axis is None:
        raise RequestRefused(NO_TOKEN_AXIS.format(value=value.standard_path))
    return ids, (value.host(model), value.name, value.token_axis, reduce), ()


def vector_reads(model, host, name: str, axis: int, reduce: str) -> dict:
    """Inside the prompt's invoke: the value at its last token, or its mean over the
    tokens, as float32 on the CPU (the leading batch axis of 1 dropped)."""
    value = getattr(host, name).float()
    reduced = value.select(axis, -1) if reduce == "last" else value.mean(axis)
    if reduced.dim() > 1 and reduced.shape[0] == 1:
        reduced = reduced[0]
    return {"vector": reduced.cpu()}


def vector_result(model, ids, out: dict) -> np.ndarray:
    """The reduced value, a read-only float32 numpy array."""
    vector = to_numpy(out["vector"], np.float32)
    vector.setflags(write=False)
    return vector


#: ``session.each(prompts)``'s question (`run_each`).
VECTOR_QUESTION = Question("value", vector_reads, vector_result, as_given)
