"""The panels' data: plain immutable objects built from the session's engine requests.

Each panel renders one of these and nothing else, so every number a widget shows can
be tested here without a browser. Arrays are numpy, on the CPU; token text is data (a
widget renders it as text, never as markup).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: A quantised pattern's cell is ``round(p * QUANT)`` in a uint8 (error at most 1/510).
QUANT = 255


@dataclass(frozen=True)
class Tokens:
    """A prompt's tokens: ids and their decoded text, one entry per position."""

    ids: tuple[int, ...]
    texts: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.ids)

    def labels(self) -> list[str]:
        """One label per position, distinct even where the text repeats (``"in·4"``)."""
        return [f"{text}·{index}" for index, text in enumerate(self.texts)]


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


@dataclass(frozen=True)
class LensPanel:
    """The logit lens over a window of positions: the top-k of ``project_on_vocab``.

    ``top_ids`` / ``top_probs`` are ``[layers, window, k]`` for positions ``start ..
    start + window - 1``; ``top_texts`` the tokens' text. ``model_top_ids`` /
    ``model_top_probs`` are the model's own prediction (its logits) at the last
    position, which the last row's cell there equals (when the window holds it).
    """

    tokens: Tokens
    top_ids: np.ndarray
    top_probs: np.ndarray
    top_texts: tuple[tuple[tuple[str, ...], ...], ...]
    model_top_ids: np.ndarray
    model_top_probs: np.ndarray
    #: The first position of the window.
    start: int = 0

    def __post_init__(self) -> None:
        layers, window, _ = self.top_probs.shape
        if self.top_ids.shape != self.top_probs.shape:
            raise ValueError(f"top_ids {self.top_ids.shape} and top_probs {self.top_probs.shape} differ")
        if not 0 <= self.start <= self.start + window <= len(self.tokens):
            raise ValueError(f"a lens window of {window} at {self.start} does not fit {len(self.tokens)} tokens")

    @property
    def num_layers(self) -> int:
        return int(self.top_ids.shape[0])

    @property
    def stop(self) -> int:
        """One past the window's last position."""
        return self.start + int(self.top_ids.shape[1])

    @property
    def positions(self) -> range:
        return range(self.start, self.stop)

    @property
    def layer_labels(self) -> list[str]:
        return [f"layers[{i}]" for i in range(self.num_layers)]

    def top1_probs(self) -> np.ndarray:
        """``[layers, window]``: the colour of each cell."""
        return self.top_probs[..., 0]

    def top1_texts(self) -> list[list[str]]:
        return [[cell[0] for cell in row] for row in self.top_texts]


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
class AttentionPanel:
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
    def from_probabilities(cls, tokens: Tokens, layer: int, num_layers: int, pattern: np.ndarray) -> "AttentionPanel":
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


@dataclass(frozen=True)
class PromptResult:
    """What one prompt request gave: what the explorer paints first.

    The tokens, the lens over a window of positions (the model's own prediction
    included), the shown layer's pattern, and the standard values' shapes for this
    prompt (from the engine's description). Other layers, lens windows and value
    previews are further requests (see `Session`).
    """

    prompt: str
    tokens: Tokens
    lens: LensPanel
    #: The shown layer's pattern; ``None`` where the family serves none.
    attention: AttentionPanel | None = None
    #: The layers a pattern can be asked for (those serving ``attention_probabilities``).
    pattern_layers: tuple[int, ...] = ()
    #: Value id -> shape for this prompt (``None`` where unknown or not served).
    shapes: dict = field(default_factory=dict)
    #: Heads ablated for this prompt, ``((layer, head), ...)``.
    ablate: tuple = ()
    #: Bytes of the arrays the engine returned.
    nbytes: int = 0
    #: With heads ablated: the ablated run against the clean one (an `AblationDelta`,
    #: from a second invoke of the same trace); else None.
    ablation: Any = None

    @property
    def patterns(self) -> dict:
        """``{layer: [heads, rows, cols] float32}`` of the layer this result holds (its
        cells as shipped: block maxima past `PATTERN_SIDE` tokens)."""
        return {} if self.attention is None else {self.attention.layer: self.attention.pattern}
