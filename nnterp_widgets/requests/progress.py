"""How a long request says how far it is, shows what it has, and learns it should stop.

A request that runs in chunks (a generation's steps, an occlusion's invokes, a patching
sweep's cells) takes a ``progress`` argument and calls it between chunks::

    def occlude(model, prompt, answer, progress=NO_PROGRESS):
        progress.start(total=len(positions))
        for chunk in chunks:
            rows.extend(run(chunk))
            progress.advance(len(rows), lambda: Occlusion(...rows so far...))  # may raise Stopped

The session's `Job` is such a ``progress``: it records ``(done, total)``, keeps the
partial result's maker (built only when asked: `Job.partial`), and raises `Stopped` at
the next chunk boundary once the job is cancelled. `NO_PROGRESS` watches nothing.
"""

from __future__ import annotations

import time
from typing import Any, Callable


class Stopped(Exception):
    """The request was cancelled; raised at a chunk boundary, never inside a trace."""


class Progress:
    """What a request reports to between chunks; this base watches nothing."""

    def start(self, total: int) -> None:
        """The request's size, in its own units (tokens written, positions occluded, cells)."""

    def advance(self, count: int, partial: Callable[[], Any] | None = None) -> None:
        """``count`` units are done; ``partial()`` builds the result so far. Raises `Stopped`
        when the request should stop here."""


#: The progress of a request nobody watches (a direct call on an engine).
NO_PROGRESS = Progress()


#: Seconds a chunk aims at: a cancel waits at most about this long (the issue's bound is
#: 2 s on the CPU engine), while each chunk's own overhead stays small beside it; where a
#: chunk's fixed start alone passes half of it, twice that start (`MOST_FIXED_SHARE`).
CHUNK_S = 1.0


#: The most of a chunk's time its fixed start may take (a batch's generation re-reads all
#: its sequences at each chunk's start): where the start alone passes this share of the
#: chunk's seconds, the chunk runs ``start / MOST_FIXED_SHARE`` (twice the start), so that
#: re-reading takes at most half the work and a stop waits about that long.
MOST_FIXED_SHARE = 0.5

#: How many times the smaller of two chunks' sizes the larger must be for a fit of the two:
#: closer sizes leave the per-item part to the timings' noise.
FIT_SPREAD = 2

#: How many times the chunk before a size fitted from two chunks may be: a fit of two noisy
#: timings is not trusted to jump further in one go.
MOST_GROWTH = 4


class Pace:
    """Chunk sizes that keep a chunk near `CHUNK_S` seconds: ``first`` items, then as many
    as the pace of the chunks before fits, at most ``most`` (vLLM's per-request bound).

    A chunk's time is a fixed part (its start; a generation's chunk re-reads its sequences
    as a prefill) and a part per item, fitted from the last chunk and the latest one
    `FIT_SPREAD` times smaller or larger; with none such, or a fit that makes no sense (a
    part below zero), the time is all per item. Where the fixed part passes
    ``seconds * MOST_FIXED_SHARE``, a chunk takes ``fixed / MOST_FIXED_SHARE`` instead.

        pace = Pace(first=2, most=64)
        size = pace.next()           # 2
        pace.took(size, 0.1)         # 0.05 s an item
        pace.next()                  # 20
    """

    def __init__(self, first: int, most: int, seconds: float = CHUNK_S) -> None:
        self._size = max(1, min(first, most))
        self._most = most
        self._seconds = seconds
        self._seen: list[tuple[int, float]] = []

    def next(self) -> int:
        return self._size

    def took(self, items: int, seconds: float) -> None:
        items, seconds = max(1, items), max(seconds, 1e-4)
        other = next(
            (seen for seen in reversed(self._seen) if max(seen[0], items) >= FIT_SPREAD * min(seen[0], items)), None
        )
        self._seen.append((items, seconds))
        fixed, each = 0.0, seconds / items
        if other is not None:
            slope = (seconds - other[1]) / (items - other[0])
            start = seconds - slope * items
            if slope > 0 and 0 <= start < seconds:
                fixed, each = start, slope
        budget = max(self._seconds, fixed / MOST_FIXED_SHARE)
        size = int((budget - fixed) / each)
        if fixed:
            size = min(size, MOST_GROWTH * items)
        self._size = max(1, min(self._most, size))


class Within(Progress):
    """The progress of one part of a larger request (a group of a batch's prompts): its
    own steps are not counted, but each is a point where the whole may stop (``outer``
    hears ``done`` again, with the whole's ``partial``)."""

    def __init__(self, outer: Progress, done: int, partial: Callable[[], Any] | None = None) -> None:
        self._outer, self._done, self._partial = outer, done, partial

    def advance(self, count: int, partial: Callable[[], Any] | None = None) -> None:
        self._outer.advance(self._done, self._partial)


#: Seconds between the reports of a stream of engine steps (a registration's prompts, a
#: sweep's cells): a step may finish a few of them, and a display needs no more than this.
STEP_REPORT_S = 0.25


class Every(Progress):
    """``outer``, told at most every ``seconds`` (the first report at once): what a stream
    of engine steps reports to. A stop is honoured at the next report that goes through."""

    def __init__(self, outer: Progress, seconds: float = STEP_REPORT_S) -> None:
        self._outer, self._seconds, self._last = outer, seconds, None

    def start(self, total: int) -> None:
        self._outer.start(total)

    def advance(self, count: int, partial: Callable[[], Any] | None = None) -> None:
        now = time.perf_counter()
        if self._last is None or now - self._last >= self._seconds:
            self._last = now
            self._outer.advance(count, partial)
