"""One layer's attention pattern: `AttentionPattern` and its requests (a layer, a zoom
window, one query's row).

The pattern never exists in vLLM (its kernel fuses it): the engine recomputes it from
the step's queries and keys. A request ships it quantised to one byte a cell, max-pooled
to at most `PATTERN_SIDE` cells a side on a longer prompt, with per-head thumbnails::

    pattern = run_attention(model, text, layer=3)
    pattern.pattern[head]                # [rows, cols] float32, as shipped
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from ..engine import probability_rows
from .question import Question, as_given
from .common import (
    MAX_RESULT_BYTES,
    RequestRefused,
    Tokens,
    ablate_block,
    check_prompt,
    checked,
    crossing,
    prompt_key,
    check_size,
    described,
    to_numpy,
    tokens_of,
)
from .tables import cells


#: A quantised pattern's cell is ``round(p * QUANT)`` in a uint8 (error at most 1/510).
QUANT = 255


def mean_pool(matrix: np.ndarray, max_side: int) -> np.ndarray:
    """Mean over blocks so that neither side exceeds ``max_side``; float32.

    Blocks are ``ceil(side / max_side)`` wide; the last block of a side may be narrower
    and is averaged over what it holds (the engine's thumbnails pool the same way).
    """
    if max_side < 1:
        raise ValueError(f"max_side must be >= 1, got {max_side}")
    matrix = np.asarray(matrix)
    rows, cols = matrix.shape
    block_r = max(1, math.ceil(rows / max_side))
    block_c = max(1, math.ceil(cols / max_side))
    if block_r == 1 and block_c == 1:
        return np.ascontiguousarray(matrix, dtype=np.float32)
    starts_r = np.arange(0, rows, block_r)
    starts_c = np.arange(0, cols, block_c)
    sums = np.add.reduceat(np.add.reduceat(matrix.astype(np.float64), starts_r, axis=0), starts_c, axis=1)
    sizes_r = np.diff(np.append(starts_r, rows))
    sizes_c = np.diff(np.append(starts_c, cols))
    return (sums / np.outer(sizes_r, sizes_c)).astype(np.float32)


#: A head's thumbnail is at most this many cells a side.
THUMBNAIL_SIDE = 64


#: A shipped pattern is at most this many cells a side: a prompt of up to this many
#: tokens ships every cell; a longer one ships each head max-pooled in square blocks of
#: ``ceil(tokens / PATTERN_SIDE)`` tokens (what a heatmap can draw), and a zoom ships a
#: window of exact cells at most this wide.
PATTERN_SIDE = 512


def pattern_block(tokens: int, side: int = PATTERN_SIDE) -> int:
    """The block a side of a ``tokens``-token pattern is pooled in to fit ``side`` cells."""
    if side < 1:
        raise ValueError(f"a pattern side must be >= 1, got {side}")
    return max(1, math.ceil(tokens / side))


@dataclass(frozen=True)
class AttentionPattern:
    """One layer's prefill ``attention_probabilities``, as shipped.

    ``quantized`` is ``[heads, rows, cols]`` uint8, ``round(p * 255)`` (one byte a cell).
    Cell ``(i, j)`` covers queries ``query_start + i * block`` onwards and keys
    ``key_start + j * block`` onwards, ``block`` tokens a side (the last cell of a side
    may hold fewer; see `query_range` / `key_range`). ``block == 1``: exact cells (the
    whole prompt, or a zoom window from ``(query_start, key_start)``); ``block > 1``: the
    whole prompt, each cell the *maximum* over its block, so a strong single-token
    attention stays visible. ``thumbnails`` is ``[heads, r, c]`` float32, each head's
    exact probabilities over the whole prompt mean-pooled to at most `THUMBNAIL_SIDE` a
    side, for the head grid.
    """

    tokens: Tokens
    layer: int
    num_layers: int
    quantized: np.ndarray
    thumbnails: np.ndarray
    #: Tokens a cell covers, a side.
    block: int = 1
    #: The first query / key position of cell ``(0, 0)``.
    query_start: int = 0
    key_start: int = 0

    def __post_init__(self) -> None:
        count = len(self.tokens)
        if self.quantized.dtype != np.uint8 or self.quantized.ndim != 3:
            raise ValueError(
                f"a pattern must be uint8 [heads, rows, cols]; got {self.quantized.dtype} {list(self.quantized.shape)}"
            )
        rows, cols = self.quantized.shape[1:]
        if self.block < 1:
            raise ValueError(f"a pattern's block is >= 1 token; got {self.block}")
        if self.block > 1:  # pooled: the whole prompt, in as many cells as it has blocks
            want = math.ceil(count / self.block)
            if (self.query_start, self.key_start) != (0, 0) or (rows, cols) != (want, want):
                raise ValueError(
                    f"a pattern of {count} tokens pooled in blocks of {self.block} must be "
                    f"[heads, {want}, {want}] from (0, 0); got {list(self.quantized.shape)} "
                    f"from ({self.query_start}, {self.key_start})"
                )
        elif not (
            1 <= rows
            and 1 <= cols
            and 0 <= self.query_start <= self.query_start + rows <= count
            and 0 <= self.key_start <= self.key_start + cols <= count
        ):
            raise ValueError(
                f"a pattern of [{rows}, {cols}] cells from ({self.query_start}, {self.key_start}) "
                f"does not fit {count} tokens"
            )

    @classmethod
    def from_probabilities(cls, tokens: Tokens, layer: int, num_layers: int, pattern: np.ndarray) -> "AttentionPattern":
        """A panel of exact cells from float probabilities ``[heads, query, key]`` (quantised and pooled here)."""
        pattern = np.asarray(pattern, dtype=np.float32)
        quantized = np.rint(pattern * QUANT).astype(np.uint8)
        thumbnails = np.stack([mean_pool(head, THUMBNAIL_SIDE) for head in pattern])
        return cls(tokens, layer, num_layers, quantized, thumbnails)

    @property
    def num_heads(self) -> int:
        return int(self.quantized.shape[0])

    @property
    def exact(self) -> bool:
        """Every cell is one (query, key) pair (``block == 1``)."""
        return self.block == 1

    @property
    def whole(self) -> bool:
        """The cells cover the whole prompt (not a zoom window)."""
        count = len(self.tokens)
        stops = (self.query_start + self.rows * self.block, self.key_start + self.cols * self.block)
        return (self.query_start, self.key_start) == (0, 0) and min(stops) >= count

    @property
    def rows(self) -> int:
        return int(self.quantized.shape[1])

    @property
    def cols(self) -> int:
        return int(self.quantized.shape[2])

    def query_range(self, row: int) -> tuple[int, int]:
        """``(first, stop)`` of the query positions cell row ``row`` covers."""
        return self._range(self.query_start, row, self.rows)

    def key_range(self, col: int) -> tuple[int, int]:
        """``(first, stop)`` of the key positions cell column ``col`` covers."""
        return self._range(self.key_start, col, self.cols)

    def _range(self, start: int, index: int, cells: int) -> tuple[int, int]:
        if not 0 <= index < cells:
            raise IndexError(f"cell {index} is out of range: this pattern has cells 0..{cells - 1} a side")
        first = start + index * self.block
        return first, min(first + self.block, len(self.tokens))

    def query_ranges(self) -> list[tuple[int, int]]:
        return [self.query_range(i) for i in range(self.rows)]

    def key_ranges(self) -> list[tuple[int, int]]:
        return [self.key_range(j) for j in range(self.cols)]

    def query_cell(self, position: int) -> int | None:
        """The row holding query ``position``, or None where the cells do not cover it."""
        return self._cell(self.query_start, self.rows, position)

    def key_cell(self, position: int) -> int | None:
        """The column holding key ``position``, or None where the cells do not cover it."""
        return self._cell(self.key_start, self.cols, position)

    def _cell(self, start: int, cells: int, position: int) -> int | None:
        index = (int(position) - start) // self.block
        return index if position >= start and index < cells else None

    def zoom_origin(self, row: int, col: int, side: int = PATTERN_SIDE) -> tuple[int, int]:
        """``(query_start, key_start)`` of the ``side``-wide window of exact cells centred on
        cell ``(row, col)``, moved inside the prompt."""
        count = len(self.tokens)

        def origin(first: int, stop: int) -> int:
            return int(min(max(0, (first + stop) // 2 - side // 2), max(0, count - side)))

        return origin(*self.query_range(row)), origin(*self.key_range(col))

    def head(self, index: int) -> np.ndarray:
        """Head ``index``'s cells, decoded to float32 ``[rows, cols]`` (the exact pattern
        where ``block == 1``; block maxima where it is more)."""
        if not 0 <= index < self.num_heads:
            raise IndexError(f"head {index} is out of range: layer {self.layer} has heads 0..{self.num_heads - 1}")
        return self.quantized[index].astype(np.float32) / QUANT

    @property
    def pattern(self) -> np.ndarray:
        """Every head decoded, float32 ``[heads, rows, cols]`` (4 bytes a cell)."""
        return self.quantized.astype(np.float32) / QUANT

    def to_bytes(self) -> bytes:
        """The quantised pattern, one byte a cell, row-major, for a binary message."""
        return np.ascontiguousarray(self.quantized).tobytes()

    @property
    def nbytes(self) -> int:
        return int(self.quantized.nbytes + self.thumbnails.nbytes)

    def to_pandas(self):
        """One row per (head, query, key) cell: ``weight`` (as shipped: one byte a cell;
        where ``block > 1`` a cell is the maximum over ``block`` tokens a side, its query
        and key the block's first)."""
        heads, rows, cols = self.quantized.shape
        return cells(
            {
                "head": range(heads),
                "query": self.query_start + self.block * np.arange(rows),
                "key": self.key_start + self.block * np.arange(cols),
            },
            {"weight": self.pattern},
        )


def pattern_layers(model) -> tuple[int, ...]:
    """The layers whose pattern the engine serves."""
    return tuple(v.layer for v in described(model) if v.name == "attention_probabilities" and v.available)


def check_layer(model, layer: int) -> None:
    layers = pattern_layers(model)
    if layer not in layers:
        span = f"layers {layers[0]}..{layers[-1]}" if layers else "no layer (this family serves no pattern)"
        raise RequestRefused(f"no attention pattern for layer {layer}: this model has a pattern on {span}")


def pattern_bytes(heads: int, tokens: int, side: int = PATTERN_SIDE, window: tuple | None = None) -> int:
    """What one layer's shipped pattern (quantised, pooled to ``side`` cells a side, or a
    ``side``-wide ``window`` from ``(query_start, key_start)``) and its thumbnails weigh."""
    if window is None:
        rows = cols = math.ceil(tokens / pattern_block(tokens, side))
    else:
        rows, cols = (min(side, tokens - start) for start in window)
    thumb = min(tokens, THUMBNAIL_SIDE)
    return heads * rows * cols + heads * thumb * thumb * 4


def check_window(tokens: int, window) -> tuple[int, int]:
    """``window`` as ``(query_start, key_start)`` inside a ``tokens``-token prompt."""
    try:
        query, key = (int(n) for n in window)
    except (TypeError, ValueError):
        raise RequestRefused(f"a pattern window is (query_start, key_start); got {window!r}") from None
    if not (0 <= query < tokens and 0 <= key < tokens):
        raise RequestRefused(f"pattern window ({query}, {key}) is outside this prompt's positions 0..{tokens - 1}")
    return query, key


#: Bytes one block of a pattern's rows may take while it is recomputed on the CPU: a
#: pattern is computed, pooled and quantised this many bytes of rows at a time, so no
#: layer's whole ``[heads, tokens, tokens]`` is ever held (4 GB a layer at 16,384 tokens
#: on an 8B shape's 32 heads; 128 GB at 32,768 for the scores and their softmax). Small
#: blocks stay in the CPU's cache: 32 MiB took 0.4-0.6x the time of 256 MiB at 4,096 and
#: 8,192 tokens (bench/pattern_rows.py).
ROWS_BYTES = 32 * 2**20
#: The most a block takes on a GPU, where its cost is its kernel launches more than its
#: bytes: on an H100, 8B shape, 1 GiB blocks took 451 ms at 32,768 tokens against 742 ms
#: at 256 MiB, 0.2-1.6 GB over the forward's own peak from 8,192 to 32,768 tokens
#: (docs/gpu.md, run 11).
GPU_ROWS_BYTES = 2**30
#: A GPU's block is at most this share of its free memory (a block, its softmax and the
#: pooled copies together stay under half of it), so a GPU that vLLM has nearly filled
#: gets smaller blocks instead of a refusal.
FREE_SHARE = 8


def rows_bytes_on(device: torch.device | str, free: int | None = None) -> int:
    """A block of rows' bytes where the pattern is computed: `ROWS_BYTES` on the CPU; on
    a GPU `GPU_ROWS_BYTES`, or `FREE_SHARE` of its ``free`` bytes where that is less (read
    from the device when not given), never less than `ROWS_BYTES`."""
    device = torch.device(device)
    if device.type == "cpu":
        return ROWS_BYTES
    if free is None:
        try:
            free = torch.cuda.mem_get_info(device)[0]
        except Exception:  # noqa: BLE001 - a device torch cannot ask: the measured default
            return GPU_ROWS_BYTES
    return max(ROWS_BYTES, min(GPU_ROWS_BYTES, int(free) // FREE_SHARE))


def rows_at_once(heads: int, tokens: int, block: int = 1, rows_bytes: int | None = None) -> int:
    """How many query rows one block of a pattern's recomputation takes: as many as fit
    ``rows_bytes`` (default `ROWS_BYTES`), a whole number of pooling ``block`` s (at
    least one)."""
    rows = max(1, (ROWS_BYTES if rows_bytes is None else rows_bytes) // (4 * heads * max(1, tokens)))
    return max(block, rows // block * block)


def pattern_payload(
    attention,
    queries: torch.Tensor,
    keys: torch.Tensor,
    block: int = 1,
    window: tuple | None = None,
    rows_bytes: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """A layer's pattern as shipped, from its ``attention_queries`` and ``attention_keys``
    (read in the trace; ``attention`` is the block's envoy): (uint8 ``round(p * 255)``
    cells, pooled thumbnails), numpy arrays (`crossing`).

    The cells: every one (``block == 1``), each ``block``-token square's maximum, or the
    exact ones in ``window`` ``(q0, q1, k0, k1)``. The probabilities are recomputed
    `rows_at_once` rows at a time (``rows_bytes`` of them; default `rows_bytes_on` the
    device) and each block pooled and cut on the engine's device before the next, so
    only what is shipped is ever whole. A block of rows is scored against the keys up to
    its last query only (rounded up to whole pooling cells): attention is causal, so
    every later key's weight is 0 there, and a long prompt's pattern costs half its
    square.
    """
    heads, tokens = queries.shape[1], queries.shape[2]
    device = queries.device
    thumb = -(-tokens // THUMBNAIL_SIDE)  # a thumbnail cell's side, in tokens
    side = -(-tokens // thumb)
    sums = torch.zeros(heads, side, side, dtype=torch.float32, device=device)
    if window is not None:
        q0, q1, k0, k1 = window
        shipped = torch.zeros(heads, q1 - q0, k1 - k0, dtype=torch.uint8, device=device)
    else:
        q0, q1, k0, k1 = 0, tokens, 0, tokens
        rows = -(-tokens // block)
        shipped = torch.zeros(heads, rows, rows, dtype=torch.uint8, device=device)
    rows_bytes = rows_bytes_on(device) if rows_bytes is None else rows_bytes
    step = rows_at_once(heads, tokens, 1 if window is not None else block, rows_bytes)
    if window is None and step >= tokens:
        return _whole_payload(probability_rows(attention, queries, keys, 0, tokens), block, thumb)
    cell = math.lcm(thumb, 1 if window is not None else block)  # keys are cut at whole cells
    for start in range(0, tokens, step):
        stop = min(tokens, start + step)
        seen = min(tokens, max(-(-stop // cell) * cell, k1 if window is not None else 0))
        probabilities = probability_rows(attention, queries, keys[:, :, :seen], start, stop)
        # ceil_mode with no padding: a last, narrower block is the mean (below: the
        # maximum) of what it holds, as `mean_pool` does.
        columns = torch.nn.functional.avg_pool2d(probabilities, (1, thumb), (1, thumb), ceil_mode=True)
        bins = torch.arange(start, stop, device=device) // thumb
        sums[:, :, : columns.shape[2]].index_add_(1, bins, columns)
        if window is not None:
            low, high = max(start, q0), min(stop, q1)
            if low < high:
                part = probabilities[:, low - start : high - start, k0:k1]
                shipped[:, low - q0 : high - q0] = _quantized(part)
        elif block > 1:
            pooled = torch.nn.functional.max_pool2d(probabilities, block, block, ceil_mode=True)
            shipped[:, start // block : start // block + pooled.shape[1], : pooled.shape[2]] = _quantized(pooled)
        else:
            shipped[:, start:stop, :seen] = _quantized(probabilities)
        del probabilities, columns
    counts = torch.bincount(torch.arange(tokens, device=device) // thumb).to(sums)
    return crossing(shipped), crossing(sums / counts[None, :, None])


def _whole_payload(probabilities: torch.Tensor, block: int, thumb: int) -> tuple[np.ndarray, np.ndarray]:
    """`pattern_payload` of a pattern whose rows fit one block (every short prompt's): the
    same cells and thumbnails from a few kernels, where the general loop's bookkeeping
    costs a dataset a millisecond a prompt."""
    pooled = (
        probabilities if block == 1 else torch.nn.functional.max_pool2d(probabilities, block, block, ceil_mode=True)
    )
    thumbnails = (
        probabilities if thumb == 1 else torch.nn.functional.avg_pool2d(probabilities, thumb, thumb, ceil_mode=True)
    )
    return crossing(_quantized(pooled)), crossing(thumbnails)


def _quantized(probabilities: torch.Tensor) -> torch.Tensor:
    return (probabilities * QUANT).round_().to(torch.uint8)


def run_attention(
    model,
    prompt: str,
    layer: int,
    *,
    window: Any = None,
    ablate: Sequence = (),
    max_bytes: int = MAX_RESULT_BYTES,
    side: int = PATTERN_SIDE,
) -> AttentionPattern:
    """Layer ``layer``'s pattern for ``prompt``: one trace.

    ``window=None``: the whole pattern as the prompt request ships it (a layer switch);
    ``window=(query_start, key_start)``: the exact cells of at most ``side`` queries and
    keys from there (a zoom).
    """
    ids, heads, layer = _pattern_inputs(model, prompt, layer, ablate)
    count = len(ids)
    origin = None if window is None else check_window(count, window)
    check_size(pattern_bytes(model.num_heads, count, side, origin), max_bytes, "shorten the prompt")
    block, cut = pattern_block(count, side), None
    if origin is not None:
        block, (q0, k0) = 1, origin
        cut = (q0, min(count, q0 + side), k0, min(count, k0 + side))
    return _pattern_request(model, ids, layer, heads, block, cut, origin or (0, 0))


def run_attention_row(
    model, prompt: str, layer: int, query: int, *, ablate: Sequence = (), max_bytes: int = MAX_RESULT_BYTES
) -> AttentionPattern:
    """Query ``query``'s exact weights over every key, in every head of layer ``layer``:
    one trace, a one-row window (the token view of a prompt past the pattern side, whose
    shipped pattern is pooled)."""
    ids, heads, layer = _pattern_inputs(model, prompt, layer, ablate)
    count = len(ids)
    query, _ = check_window(count, (query, 0))
    thumb = min(count, THUMBNAIL_SIDE)
    check_size(model.num_heads * (count + thumb * thumb * 4), max_bytes, "shorten the prompt")
    return _pattern_request(model, ids, layer, heads, 1, (query, query + 1, 0, count), (query, 0))


def _pattern_inputs(model, prompt: str, layer: Any, ablate: Sequence) -> tuple:
    """A pattern request's checked inputs: the prompt's ids, the ablated heads, the layer."""
    ids, heads = checked(model, prompt, ablate)
    layer = int(layer)
    check_layer(model, layer)
    return ids, heads, layer


def _pattern_request(model, ids, layer: int, heads: tuple, block: int, cut, origin: tuple) -> AttentionPattern:
    """One trace reading layer ``layer``'s pattern, pooled in ``block`` s or ``cut`` to a
    window, with ``heads`` ablated in the layers before it."""
    with model.trace(ids, temperature=0.0, max_tokens=1):
        out = dict().save()
        out["input_ids"] = model.input_ids[0].cpu()
        for index in range(layer):
            ablate_block(model, heads, index)
        attention = model.layers[layer].self_attn
        out["pattern"] = pattern_payload(attention, attention.attention_queries, attention.attention_keys, block, cut)
    tokens = tokens_of(model, out["input_ids"])
    return attention_pattern(tokens, layer, model.num_layers, out["pattern"], block, origin)


def attention_pattern(
    tokens: Tokens, layer: int, num_layers: int, payload: tuple, block: int = 1, origin: tuple = (0, 0)
) -> AttentionPattern:
    quantized, thumbnails = payload
    return AttentionPattern(
        tokens, layer, num_layers, to_numpy(quantized, np.uint8), to_numpy(thumbnails, np.float32), block, *origin
    )


@dataclass(frozen=True)
class Patterns:
    """Every listed layer's exact attention pattern of one prompt, float32 on the CPU.

    ``values`` is ``[layers, heads, queries, keys]`` (``layers`` in the order of
    ``layer_ids``), the probabilities as the layer computes them (its scale, softcap,
    sliding window and kv-head grouping; rows sum to 1, zero above the diagonal).
    """

    prompt: Any
    tokens: Tokens
    layer_ids: tuple[int, ...]
    values: np.ndarray

    def layer(self, layer: int) -> np.ndarray:
        """``[heads, queries, keys]`` of layer ``layer``."""
        return self.values[self.layer_ids.index(layer)]

    def stats(self) -> "PatternStats":
        """Each head's summary over the prompt's queries (`PatternStats`)."""
        entropy, distance = pattern_stats(torch.from_numpy(np.ascontiguousarray(self.values)))
        return PatternStats(self.prompt, self.tokens, self.layer_ids, entropy, distance)

    def to_pandas(self):
        """One row per (layer, head, query, key): ``weight``, the exact probability
        (``query_token`` / ``key_token`` their texts)."""
        _, heads, count, _ = self.values.shape
        return cells(
            {"layer": self.layer_ids, "head": range(heads), "query": range(count), "key": range(count)},
            {"weight": self.values},
            {"query_token": ("query", self.tokens.texts), "key_token": ("key", self.tokens.texts)},
        )


def patterns_bytes(layers: int, heads: int, tokens: int) -> int:
    """What `run_patterns` returns: float32 ``[layers, heads, tokens, tokens]``."""
    return layers * heads * tokens * tokens * 4


def pattern_stats(probabilities: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """``[..., heads, queries, keys]`` probabilities -> each head's mean, over the queries,
    of its row's entropy (nats) and of how far back it looks (the weights' mean distance
    from the query, in tokens): two ``[..., heads]`` float32 arrays (`crossing`)."""
    p = probabilities.float()
    count = p.shape[-1]
    positions = torch.arange(count, device=p.device, dtype=torch.float32)
    back = (positions[:, None] - positions[None, :]).clamp(min=0)
    entropy = -(p * torch.log(p.clamp(min=1e-30))).sum(-1).mean(-1)
    distance = (p * back).sum(-1).mean(-1)
    return crossing(entropy), crossing(distance)


@dataclass(frozen=True)
class PatternStats:
    """Each head's attention summarised over one prompt's queries, for many prompts at
    once (``session.each(prompts).patterns()``) without shipping every pattern.

    ``entropy`` / ``distance``: float32 ``[layers, heads]`` (layers in the order of
    ``layer_ids``): the mean over the queries of each row's entropy, in nats (0: all on
    one key), and of the weights' mean distance back from the query, in tokens (0: on
    itself; a previous-token head: about 1).
    """

    prompt: Any
    tokens: Tokens
    layer_ids: tuple[int, ...]
    entropy: np.ndarray
    distance: np.ndarray

    def to_pandas(self):
        """One row per (layer, head): ``entropy`` and ``distance``."""
        heads = np.shape(self.entropy)[1]
        return cells(
            {"layer": self.layer_ids, "head": range(heads)}, {"entropy": self.entropy, "distance": self.distance}
        )


def stats_plan(model, prompt: Any, layers: Any = None) -> tuple[list[int], tuple, tuple]:
    """The pattern summary's checks, before any trace: ``(ids, reads_args, build_args)``."""
    ids = check_prompt(model, prompt)
    chosen = check_layers(model, layers)
    return ids, (chosen,), (prompt, chosen)


def stats_reads(model, layers) -> dict:
    """Inside the prompt's invoke: the ids and each listed layer's `pattern_stats`."""
    out = {"input_ids": model.input_ids[0].cpu()}
    last = max(layers, default=-1)
    for index in range(last + 1):
        if index in layers:
            out[index] = pattern_stats(model.layers[index].self_attn.attention_probabilities[0])
    return out


def stats_result(model, ids, out: dict, prompt, layers) -> PatternStats:
    entropy = np.stack([to_numpy(out[i][0], np.float32) for i in layers]) if layers else np.zeros((0, 0), np.float32)
    distance = np.stack([to_numpy(out[i][1], np.float32) for i in layers]) if layers else np.zeros((0, 0), np.float32)
    return PatternStats(prompt_key(prompt), tokens_of(model, out["input_ids"]), tuple(layers), entropy, distance)


#: ``session.each(prompts)``'s question (`run_each`).
STATS_QUESTION = Question("patterns", stats_reads, stats_result, as_given)


def check_layers(model, layers: Any) -> tuple[int, ...]:
    """``layers`` (None: every layer that has a pattern) as checked layer indices."""
    served = pattern_layers(model)
    if layers is None:
        return tuple(served)
    try:
        chosen = tuple(int(layer) for layer in layers)
    except (TypeError, ValueError):
        raise RequestRefused(f"layers is a list of layer indices; got {layers!r}") from None
    for layer in chosen:
        check_layer(model, layer)
    return chosen


def run_patterns(
    model, prompt: Any, layers: Any = None, *, ablate: Sequence = (), max_bytes: int = MAX_RESULT_BYTES
) -> Patterns:
    """Every listed layer's exact pattern of ``prompt`` (all layers by default): one trace."""
    ids, heads = checked(model, prompt, ablate)
    chosen = check_layers(model, layers)
    check_size(
        patterns_bytes(len(chosen), model.num_heads, len(ids)),
        max_bytes,
        "list fewer layers or shorten the prompt",
    )
    last = max(chosen, default=-1)
    with model.trace(ids, temperature=0.0, max_tokens=1):
        out = dict().save()
        out["input_ids"] = model.input_ids[0].cpu()
        for index in range(last + 1):
            if index in chosen:
                out[index] = crossing(model.layers[index].self_attn.attention_probabilities[0].float())
            ablate_block(model, heads, index)
    values = np.stack([to_numpy(out[index], np.float32) for index in chosen]) if chosen else np.zeros((0,))
    values.setflags(write=False)
    return Patterns(prompt_key(prompt), tokens_of(model, out["input_ids"]), chosen, values)
