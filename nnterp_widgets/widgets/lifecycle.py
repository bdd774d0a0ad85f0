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

__all__ = [
    "MAIN",
    "SHOWING",
    "Asking",
    "KernelThread",
    "OneAtATime",
    "close_all",
    "one_at_a_time",
    "wait_shown",
]

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


def close_all(widgets) -> None:
    """Close each widget and, first, every widget it holds (a box does not close its children)."""
    for widget in widgets:
        close_all(getattr(widget, "children", ()))
        widget.close()


#: The class that dims a view showing an earlier prompt than the explorer's (module_tree.css).
STALE = "nnw-stale"
#: What a tool's message line says while its answer is of an earlier prompt.
STALE_NOTE = "of the earlier prompt {prompt!r}: run it again for this one"
#: What a tool's message line says of the answer left under an error.
FAILED_NOTE = "the answer shown is the earlier one{of}: this request failed"


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


#: What a view says of a request that was cancelled.
STOPPED = "stopped: the answer shown (if any) is the one before"
#: A view's first line of requests (most views have only this one).
MAIN = "main"


class _Line:
    """One line of a view's requests: each request gets a number, and only the newest's
    answer is shown, once."""

    def __init__(self) -> None:
        self.asked = 0
        self.landed = 0  # the newest request shown
        self.pending: tuple | None = None  # (asked, job, show) of the newest request
        self.idle = threading.Event()
        self.idle.set()
        self.error: BaseException | None = None


class Asking(OneAtATime):
    """A view that asks the session and shows the newest answer (a mixin; call
    ``_init_asking()`` in ``__init__``).

    ``_ask(make, show)`` sends a request (``make()`` returns its job) and, on the kernel's
    thread, hands its answer to ``show(answer)`` if it is still the newest of its line,
    then marks the view idle; an error goes to ``_show_error``. A view with two
    independent lines (a generation and its branch, a tree's prompt and its preview)
    names the second: ``_ask(make, show, line="branch")``. ``wait()`` blocks until a
    line's newest answer is shown (in a notebook cell too), re-raises its error and
    returns the answer shown: the attribute the view names in ``_shown_as``.
    """

    #: The attribute that holds the answer shown, which `wait` returns.
    _shown_as = "result"
    #: What `wait` says it waits for, in its timeout.
    _asks_for = "answer"

    def _init_asking(self) -> None:
        self._kernel = KernelThread()
        self._ask_lines: dict[str, _Line] = {MAIN: _Line()}

    def _line(self, line: str) -> _Line:
        return self._ask_lines.setdefault(line, _Line())

    @property
    def _asked(self) -> int:
        """How many requests the view's first line has asked (the newest's number)."""
        return self._ask_lines[MAIN].asked

    @property
    def _idle(self) -> threading.Event:
        return self._ask_lines[MAIN].idle

    @property
    def _error(self) -> BaseException | None:
        return self._ask_lines[MAIN].error

    @one_at_a_time
    def _ask(
        self,
        make: Callable[[], concurrent.futures.Future],
        show: Callable[[Any], None],
        line: str = MAIN,
        partial: Callable[[Any], None] | None = None,
    ) -> None:
        """Ask the session as the newest request of ``line``: ``make()`` sends it and returns
        its job; an error raised by ``make`` (bad input, a busy session) is shown at once.
        A view with a `JobBar` (``job_bar``) shows the job's progress and a stop button
        there; ``partial(answer)`` draws the job's partial answers as they land."""
        state = self._line(line)
        state.asked += 1
        asked = state.asked
        state.idle.clear()
        state.error = None
        try:
            job = make()
        except Exception as error:  # noqa: BLE001 - shown in the widget, not raised into the comm
            self._failed(error, line)
            return
        state.pending = (asked, job, show)
        bar = getattr(self, "job_bar", None)
        if bar is not None and line == MAIN and hasattr(job, "progress"):
            bar.follow(job, self._kernel)
        if partial is not None and hasattr(job, "on_progress"):
            job.on_progress(lambda running: self._kernel.call(self._deliver_partial, line, asked, running, partial))
        job.add_done_callback(lambda done: self._kernel.call(self._deliver, line, asked, done, show))

    def _deliver_partial(self, line: str, asked: int, job, partial: Callable[[Any], None]) -> None:
        """Draw ``job``'s answer so far, if it is still the newest request and not done."""
        state = self._line(line)
        if asked != state.asked or job.done():
            return
        answer = job.partial()
        if answer is not None:
            partial(answer)

    def _ask_nothing(self, line: str = MAIN) -> None:
        """No request this time (nothing to show, or shown without the engine): an answer
        still on its way is of an older choice and is not shown; `wait` returns at once."""
        state = self._line(line)
        state.asked += 1
        state.pending = None
        state.error = None
        state.idle.set()

    def _deliver(self, line: str, asked: int, job, show: Callable[[Any], None]) -> None:
        answer = self._take(line, asked, job)
        if answer is None:
            return
        state = self._line(line)
        try:
            show(answer)
        finally:
            if state.asked == asked:  # showing it asked nothing newer (a prompt's answer may)
                state.idle.set()

    def wait(self, timeout: float | None = 300, line: str = MAIN) -> Any:
        """Block until the newest request of ``line`` is shown (works in a notebook cell,
        whose blocked loop cannot show it: it is shown here); re-raises its error.

        Returns:
            The answer shown (the view's ``_shown_as`` attribute).
        """
        state = self._line(line)
        pending = state.pending
        if pending is not None:
            asked, job, show = pending
            deliver = lambda: self._deliver(line, asked, job, show)  # noqa: E731
            wait_shown(self._kernel, job, state.idle, deliver, timeout, self._asks_for)
        elif not state.idle.wait(timeout):
            raise TimeoutError(f"no {self._asks_for} from the engine within {timeout} s")
        if state.error is not None:
            raise state.error
        return getattr(self, self._shown_as)

    def _failed(self, error: BaseException, line: str = MAIN) -> None:
        """Show ``error`` (`_show_error`) and end the line's wait (`wait` re-raises it)."""
        state = self._line(line)
        state.error = error
        try:
            self._show_error(error, line)
            self._dim_under_error(line)
        finally:
            state.idle.set()

    def _dim_under_error(self, line: str) -> None:
        """A tool's answer left under an error is dimmed and said to be the earlier one
        (its next answer clears it); the explorer dims its own views when it asks."""
        if line != MAIN or not self._clears_stale or getattr(self, self._shown_as, None) is None:
            return
        if not hasattr(self, "message"):  # a view that says its error inside its own drawing (the tree)
            return
        self.add_class(STALE)
        of = "" if self.shown_prompt is None else f" ({self.shown_prompt!r})"
        self._stale_note = FAILED_NOTE.format(of=of)
        self.message.value = self._stale_note

    def _show_error(self, error: BaseException, line: str = MAIN) -> None:
        """Say ``error`` on the view's status line; a view without one says it its own way."""
        self.set_status("error", f"{type(error).__name__}: {error}")

    def _show_stopped(self, line: str = MAIN) -> None:
        """Say that the request was stopped (cancelled); what the view showed stays."""
        if line == MAIN and hasattr(self, "set_status"):
            self.set_status("idle", STOPPED)

    #: Whether an answer clears the view's stale marking (a tool's; the explorer clears
    #: its main views' itself, when the new prompt's answer lands).
    _clears_stale = True

    def _take(self, line: str, asked: int, job):
        """The answer to show for request ``asked`` of ``line``, or ``None``: a newer request
        is on its way, this one is shown already, or it failed (shown by ``_failed``; a
        superseded or cancelled one says nothing)."""
        state = self._line(line)
        if asked != state.asked or asked == state.landed:
            return None
        state.landed = asked
        if job.cancelled():
            state.idle.set()
            self._show_stopped(line)
            return None
        error = job.exception()
        if error is not None:
            if not isinstance(error, Superseded):
                self._failed(error, line)
            return None
        if self._clears_stale and line == MAIN:
            self._fresh()
        return job.result()

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
