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
