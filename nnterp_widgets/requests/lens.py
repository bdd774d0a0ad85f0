"""The logit lens over a window of positions: `LensGrid` and its request, `run_lens`.

grid = run_lens(model, "The Eiffel Tower is in the city of", 0, 10)
grid.top_texts[-1][-1][0]            # the last layer's top-1 at the last position
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .question import Question
from .common import (
    LENS_K,
    MAX_RESULT_BYTES,
    RequestRefused,
    Tokens,
    ablate_block,
    checked,
    check_size,
    texts_of,
    to_numpy,
    tokens_of,
    crossing,
    stacked_top_k,
    top_k,
)
from .tables import cells


@dataclass(frozen=True)
class LensGrid:
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

    def to_pandas(self):
        """One row per (layer, position, rank): ``token`` (the position's input text),
        ``id``, ``text`` and ``probability`` of the lens's rank-th token there."""
        layers, positions, k = self.top_ids.shape
        return cells(
            {"layer": range(layers), "position": range(self.start, self.start + positions), "rank": range(k)},
            {"id": self.top_ids, "probability": self.top_probs, "text": np.array(self.top_texts, dtype=object)},
            {"token": ("position", self.tokens.texts[self.start : self.start + positions])},
        )


#: Positions the lens shows unless told otherwise: the last ones.
LENS_WINDOW = 32


#: The widest lens window one request computes (each position costs a full-vocabulary
#: projection per layer).
MAX_LENS_WINDOW = 128


def lens_window(tokens: int, window: Any = None) -> tuple[int, int]:
    """``(start, stop)`` of the lens for ``tokens`` positions.

    ``window``: ``None`` (the last `LENS_WINDOW` positions), an int ``n`` (the last
    ``n``), or ``(start, stop)``; at most `MAX_LENS_WINDOW` wide.
    """
    if window is None or isinstance(window, (int, np.integer)):
        width = LENS_WINDOW if window is None else int(window)
        if not 1 <= width <= MAX_LENS_WINDOW:
            raise RequestRefused(f"a lens window is 1..{MAX_LENS_WINDOW} positions wide; got {width}")
        return max(0, tokens - width), tokens
    start, stop = (int(n) for n in window)
    if not 0 <= start < stop <= tokens:
        raise RequestRefused(f"lens window {start}..{stop} is outside this prompt's positions 0..{tokens}")
    if stop - start > MAX_LENS_WINDOW:
        raise RequestRefused(
            f"lens window {start}..{stop} is {stop - start} positions wide; at most "
            f"{MAX_LENS_WINDOW} at once (each costs a full-vocabulary projection per layer)"
        )
    return start, stop


def lens_bytes(layers: int, window: int, k: int = LENS_K) -> int:
    return layers * window * k * (4 + 8)


def lens_plan(
    model,
    prompt: Any,
    start: int,
    stop: int,
    *,
    ablate: Sequence = (),
    k: int = LENS_K,
    max_bytes: int = MAX_RESULT_BYTES,
) -> tuple[list[int], tuple, tuple]:
    """The lens request's checks, before any trace: ``(ids, reads_args, build_args)`` for
    `lens_reads` (inside the prompt's invoke) and `lens_result` (after)."""
    ids, heads = checked(model, prompt, ablate)
    start, stop = lens_window(len(ids), (start, stop))
    check_size(lens_bytes(model.num_layers, stop - start, int(k)), max_bytes, "narrow the lens window")
    return ids, (start, stop, int(k), heads), (start,)


def from_end(count: int, start: int, stop: int) -> tuple[int, int | None]:
    """``start:stop`` of ``count`` positions as a slice counted from the end, which reads
    the same positions of any prompt that ends the same way (for `run_each`'s ``shared``)."""
    return start - count, (stop - count) or None


def lens_shared(ids: list[int], reads_args: tuple) -> tuple:
    """`lens_reads`' arguments as they read for any prompt: the window counted from the end."""
    start, stop, k, heads = reads_args
    return (*from_end(len(ids), start, stop), k, heads)


def lens_reads(model, start: int, stop: int, k: int, heads) -> dict:
    """Inside the prompt's invoke: the ids, each layer's lens top-k over ``start:stop``
    (the heads ablated before their layer's reads) and the model's own top-k."""
    out = {"input_ids": crossing(model.input_ids[0])}
    windows = []
    for index in range(model.num_layers):
        ablate_block(model, heads, index)
        windows.append(model.layers[index].layer_output[0, start:stop])
    out["lens"] = stacked_top_k(model, windows, k)
    out["model_top"] = tuple(crossing(part) for part in top_k(model.logits[0, -1], k))
    return out


def lens_result(model, ids, out: dict, start: int) -> LensGrid:
    """The `LensGrid` from `lens_reads`' answer."""
    return lens_grid(model, tokens_of(model, out["input_ids"]), out["lens"], out["model_top"], start)


#: ``session.each(prompts)``'s question (`run_each`).
LENS_QUESTION = Question("lens", lens_reads, lens_result, lens_shared)


def run_lens(
    model,
    prompt: str,
    start: int,
    stop: int,
    *,
    ablate: Sequence = (),
    k: int = LENS_K,
    max_bytes: int = MAX_RESULT_BYTES,
) -> LensGrid:
    """The lens over positions ``start .. stop - 1`` of ``prompt``: one trace."""
    ids, reads, build = lens_plan(model, prompt, start, stop, ablate=ablate, k=k, max_bytes=max_bytes)
    with model.trace(ids, temperature=0.0, max_tokens=1):
        out = lens_reads(model.reader(), *reads).save()  # ablated heads are zeroed in place
    return lens_result(model, ids, out, *build)


def lens_grid(model, tokens: Tokens, rows: tuple, model_top: tuple, start: int) -> LensGrid:
    """The `LensGrid` of `stacked_top_k`'s ``(probs, ids)`` and the model's own top-k."""
    probs, top_ids = to_numpy(rows[0], np.float32), to_numpy(rows[1], np.int64)
    model_probs, model_ids = model_top
    return LensGrid(
        tokens,
        top_ids,
        probs,
        texts_of(model, top_ids),
        to_numpy(model_ids, np.int64),
        to_numpy(model_probs, np.float32),
        start,
    )
