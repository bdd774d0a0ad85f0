"""A widget's life: its session's answers run on the kernel's thread (`KernelThread`), one
change at a time (`SHOWING`), and closing it closes every widget it holds (`close_all`).

A session's futures resolve, and its status listeners are called, on the engine's worker
thread. Widgets set traits (which send comm messages) only from the kernel's own thread,
the one that built them: in a kernel it runs an asyncio loop, and a callback is handed to
that loop (the session's `KernelThread`). Where no loop runs (a script, a test) the
callback runs at once on the engine's thread, while the script sets traits on its own: both hold
`SHOWING`, so an answer is never shown halfway through a change the script made (a
figure updated from two threads at once breaks plotly's batch update). In a kernel the
lock is never contended.

Never block on the engine while holding it: the engine's thread needs it to show answers.
``wait`` methods take it only to show an answer that has arrived.
"""

from __future__ import annotations

import concurrent.futures
import functools
import threading
from typing import Any, Callable

from ..session import Superseded, kernel_thread

__all__ = ["SHOWING", "Asking", "KernelThread", "OneAtATime", "all_of", "close_all", "one_at_a_time", "wait_shown"]

#: Held while a widget changes what it shows: an answer landing, a trait's observers, a
#: handler of a child widget (a button, a text box), a public call that starts a request.
SHOWING = threading.RLock()


def one_at_a_time(fn: Callable) -> Callable:
    """``fn`` run holding `SHOWING` (a method or a handler given to a child widget)."""

    @functools.wraps(fn)
    def holding(*args: Any, **kwargs: Any) -> Any:
        with SHOWING:
            return fn(*args, **kwargs)

    return holding


class OneAtATime:
    """A widget mixin: its traits' observers run holding `SHOWING`."""

    def notify_change(self, change) -> None:
        with SHOWING:
            super().notify_change(change)


class KernelThread(kernel_thread.KernelThread):
    """The session's `KernelThread`, whose calls hold `SHOWING` (they change what a widget shows)."""

    def call(self, fn: Callable[..., Any], *args: Any) -> None:
        super().call(one_at_a_time(fn), *args)


def all_of(futures: list) -> concurrent.futures.Future:
    """One future for several requests: their results as a tuple once every one is done,
    or the error of the first (in ``futures``' order) that failed."""
    combined: concurrent.futures.Future = concurrent.futures.Future()
    left = [len(futures)]
    lock = threading.Lock()

    def one_done(_) -> None:
        with lock:
            left[0] -= 1
            if left[0]:
                return
        for future in futures:
            if future.cancelled():
                combined.cancel()
                return
            if future.exception() is not None:
                combined.set_exception(future.exception())
                return
        combined.set_result(tuple(future.result() for future in futures))

    for future in futures:
        future.add_done_callback(one_done)
    return combined


def close_all(widgets) -> None:
    """Close each widget and, first, every widget it holds (a box does not close its children)."""
    for widget in widgets:
        close_all(getattr(widget, "children", ()))
        widget.close()


#: The class that dims a view showing an earlier prompt than the explorer's (module_tree.css).
STALE = "nnw-stale"
#: What a tool's message line says while its answer is of an earlier prompt.
STALE_NOTE = "of the earlier prompt {prompt!r}: run it again for this one"


def wait_shown(
    kernel: KernelThread,
    future: concurrent.futures.Future,
    shown: threading.Event,
    deliver: Callable[[], None],
    timeout: float | None,
    what: str,
) -> None:
    """Block until ``future``'s answer is shown (``shown`` is set by ``deliver``, which
    normally runs on the kernel's loop). In a cell on the kernel's thread that loop is
    blocked by the waiting cell, so the answer is waited for and delivered here."""
    if not shown.is_set() and kernel.here():
        if not concurrent.futures.wait([future], timeout).done:
            raise TimeoutError(f"no {what} from the engine within {timeout} s")
        with SHOWING:
            deliver()
    if not shown.wait(timeout):
        raise TimeoutError(f"no {what} from the engine within {timeout} s")


class Asking(OneAtATime):
    """A view that asks the session and shows the newest answer (a mixin; call
    ``_init_asking()`` in ``__init__``). Each request gets a number (``_asked``); an
    answer is shown only if it is the newest's, and once (by the kernel's loop, or by
    ``wait`` in a cell). A request names how its answer is shown, ``_ask(make, show)``;
    ``_failed(error)`` shows an error."""

    def _init_asking(self) -> None:
        self._kernel = KernelThread()
        self._idle = threading.Event()
        self._idle.set()
        self._error: BaseException | None = None
        self._asked = 0
        self._future: tuple | None = None  # (asked, future, show) of the newest request
        self._landed_asked = 0  # the newest request shown

    @one_at_a_time
    def _ask(self, make: Callable[[], concurrent.futures.Future], show: Callable[[Any], None]) -> None:
        """Ask the session as the newest request: ``make()`` sends it and returns its
        future; on the kernel's thread its answer goes to ``show(answer)`` if it is still
        the newest (`_take`), its error to ``_failed``; an error raised by ``make`` (bad
        input, a busy session) goes to ``_failed`` at once."""
        self._asked += 1
        asked = self._asked
        self._idle.clear()
        self._error = None
        try:
            future = make()
        except Exception as error:  # noqa: BLE001 - shown in the widget, not raised into the comm
            self._failed(error)
            return
        self._future = (asked, future, show)
        future.add_done_callback(lambda done: self._kernel.call(self._deliver, asked, done, show))

    def _ask_nothing(self) -> None:
        """No request this time (nothing to show, or shown without the engine): an answer
        still on its way is of an older choice and is not shown; `wait` returns at once."""
        self._asked += 1
        self._error = None
        self._idle.set()

    def _deliver(self, asked: int, future, show: Callable[[Any], None]) -> None:
        answer = self._take(asked, future)
        if answer is not None:
            show(answer)

    def _wait_shown(self, timeout: float | None, what: str) -> None:
        """Block until the newest request is shown (`wait_shown`); re-raise its error."""
        pending = self._future
        if pending is not None:
            asked, future, show = pending
            wait_shown(self._kernel, future, self._idle, lambda: self._deliver(asked, future, show), timeout, what)
        elif not self._idle.wait(timeout):
            raise TimeoutError(f"no {what} from the engine within {timeout} s")
        if self._error is not None:
            raise self._error

    def _failed(self, error: BaseException) -> None:
        """Show ``error`` on the view's status line and end the wait (`wait` re-raises it);
        a view without a status line says it its own way."""
        self._error = error
        self.set_status("error", f"{type(error).__name__}: {error}")
        self._idle.set()

    #: Whether an answer clears the view's stale marking (a tool's; the explorer clears
    #: its main views' itself, when the new prompt's answer lands).
    _clears_stale = True

    def _take(self, asked: int, future):
        """The answer to show for request ``asked``, or ``None``: a newer request is on its
        way, this one is shown already, or it failed (shown by ``_failed``; a superseded
        one says nothing)."""
        if asked != self._asked or asked == self._landed_asked or future.cancelled():
            return None
        self._landed_asked = asked
        error = future.exception()
        if error is not None:
            if not isinstance(error, Superseded):
                self._failed(error)
            return None
        if self._clears_stale:
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
