"""A widget's life: its session's answers run on the kernel's thread (`KernelThread`), and
closing it closes every widget it holds (`close_all`).

A session's futures resolve, and its status listeners are called, on the engine's worker
thread. Widgets set traits (which send comm messages) only from the kernel's own thread,
the one that built them: in a kernel it runs an asyncio loop, and a callback is handed to
that loop (``call_soon_threadsafe``). Where no loop runs (a script, a test) there is no
other thread to wait for, and the callback runs at once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Callable

__all__ = ["Asking", "KernelThread", "Landing", "close_all"]


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class KernelThread:
    """Built on the kernel's thread; ``call(fn, *args)`` runs ``fn`` there."""

    def __init__(self) -> None:
        self.loop = _running_loop()

    def here(self) -> bool:
        """Whether this is the kernel's thread (or no loop runs: nothing to hand over to)."""
        loop = self.loop
        return loop is None or loop.is_closed() or _running_loop() is loop

    def call(self, fn: Callable[..., Any], *args: Any) -> None:
        if self.here():
            fn(*args)
        else:
            self.loop.call_soon_threadsafe(fn, *args)


class Landing:
    """The newest request of a view that shows its answer from the kernel's loop, so that
    ``wait`` can show it itself when called in a cell: the cell blocks the loop the
    answer is waiting for. ``ask(future, show)`` hands ``show()`` to the loop when the
    future is done; ``wait(timeout)``, on the kernel's thread, waits for the future and
    calls ``show()`` at once. ``show`` runs once either way."""

    def __init__(self, kernel: KernelThread) -> None:
        self._kernel = kernel
        self._pending: tuple | None = None

    def ask(self, future: concurrent.futures.Future, show: Callable[[], None]) -> None:
        shown = threading.Event()

        def once() -> None:
            if not shown.is_set():
                shown.set()
                show()

        self._pending = (future, once)
        future.add_done_callback(lambda done: self._kernel.call(once))

    def wait(self, timeout: float | None, what: str) -> None:
        """On the kernel's thread, show the newest answer here (waiting for it)."""
        pending = self._pending
        if pending is None or not self._kernel.here():
            return
        future, once = pending
        if not concurrent.futures.wait([future], timeout).done:
            raise TimeoutError(f"no {what} from the engine within {timeout} s")
        once()


def close_all(widgets) -> None:
    """Close each widget and, first, every widget it holds (a box does not close its children)."""
    for widget in widgets:
        close_all(getattr(widget, "children", ()))
        widget.close()


#: The class that dims a view showing an earlier prompt than the explorer's (module_tree.css).
STALE = "nnw-stale"
#: What a tool's message line says while its answer is of an earlier prompt.
STALE_NOTE = "of the earlier prompt {prompt!r}: run it again for this one"


class Asking:
    """A view that asks the session and shows the newest answer (a mixin; call
    ``_init_asking()`` in ``__init__``). Each request gets a number (``_asked``); an
    answer is shown only if it is the newest's, and once (by the kernel's loop, or by
    ``wait`` in a cell). The view defines ``_land(asked, future)`` (show it) and
    ``_failed(error)``."""

    def _init_asking(self) -> None:
        self._kernel = KernelThread()
        self._idle = threading.Event()
        self._idle.set()
        self._error: BaseException | None = None
        self._asked = 0
        self._future: tuple | None = None  # (asked, future) of the newest request
        self._shown = 0  # the newest request shown

    def _ask(self, make: Callable[[], concurrent.futures.Future]) -> None:
        """Ask the session as the newest request: ``make()`` sends it and returns its
        future; the answer is shown by ``_land`` on the kernel's thread, an error raised
        by ``make`` (bad input, a busy session) by ``_failed`` at once."""
        self._asked += 1
        asked = self._asked
        self._idle.clear()
        self._error = None
        try:
            future = make()
        except Exception as error:  # noqa: BLE001 - shown in the widget, not raised into the comm
            self._failed(error)
            return
        self._future = (asked, future)
        future.add_done_callback(lambda done: self._kernel.call(self._land, asked, done))

    def _wait_shown(self, timeout: float | None, what: str) -> None:
        """Block until the newest request is shown; re-raise its error. In a cell on the
        kernel's thread the loop that would show the answer is blocked by the waiting
        cell, so the answer is waited for and shown here."""
        pending = self._future
        if pending is not None and not self._idle.is_set() and self._kernel.here():
            asked, future = pending
            if not concurrent.futures.wait([future], timeout).done:
                raise TimeoutError(f"no {what} from the engine within {timeout} s")
            self._land(asked, future)
        if not self._idle.wait(timeout):
            raise TimeoutError(f"no {what} from the engine within {timeout} s")
        if self._error is not None:
            raise self._error

    def _failed(self, error: BaseException) -> None:
        """Show ``error`` on the view's status line and end the wait (`wait` re-raises it);
        a view without a status line says it its own way."""
        self._error = error
        self.set_status("error", f"{type(error).__name__}: {error}")
        self._idle.set()

    def _take(self, asked: int, future):
        """The answer to show for request ``asked``, or ``None``: a newer request is on its
        way, this one is shown already, or it failed (shown by ``_failed``; a superseded
        one says nothing)."""
        if asked != self._asked or asked == self._shown or future.cancelled():
            return None
        self._shown = asked
        error = future.exception()
        if error is not None:
            if type(error).__name__ != "Superseded":
                self._failed(error)
            return None
        self._fresh()
        return future.result()

    #: The prompt of the answer shown, or None: each view says where it keeps it.
    shown_prompt: str | None = None

    def mark_stale(self, prompt: str) -> None:
        """The explorer asked ``prompt``: dim this view, and say so, if its answer is of another."""
        if self.shown_prompt is not None and self.shown_prompt != prompt:
            self.add_class(STALE)
            self._stale_note = STALE_NOTE.format(prompt=self.shown_prompt)
            self.message.value = self._stale_note
        elif self.shown_prompt == prompt:
            self._fresh()

    def _fresh(self) -> None:
        self.remove_class(STALE)
        note = getattr(self, "_stale_note", None)
        if note is not None and self.message.value == note:
            self.message.value = ""
        self._stale_note = None
