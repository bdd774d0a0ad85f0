"""`EngineWorker`: the one thread that owns the engine and serves every request.

Widgets never call the engine: they submit a request and get a `Job` (a future with
progress and cancel). A request under a key (one per panel) is coalesced with that key's
(a newer request replaces one still waiting, whose job ends `Superseded`); a request
without a key is never replaced. Requests are served one at a time in the order their
keys were first queued; a failure ends only its own job, a cancelled one stops at its
next chunk and the next request is served. A dead engine process is
reported and reopened before the next request.
"""

from __future__ import annotations

import signal
import threading
import traceback
from collections import OrderedDict
import itertools
from concurrent.futures import Future
from typing import Any, Callable

from ..requests.progress import Stopped
from .job import Job
from .status import READY, STARTING, State, Status

#: Distinct keys that may wait at once; past it `submit` refuses rather than grow.
MAX_PENDING = 64


class Superseded(Exception):
    """A newer request under the same key replaced this one before it ran."""


class Busy(RuntimeError):
    """Too many distinct requests are waiting."""


class EngineDied(RuntimeError):
    """The engine's process died while serving this request; it is being reopened."""


Listener = Callable[[Status], None]

#: What a killing signal usually means, said beside its name.
SIGNAL_HINTS = {
    signal.SIGKILL: "the system's out-of-memory killer sends it when memory runs out",
    signal.SIGSEGV: "a crash in native code",
}


def death_cause(engine: Any) -> str:
    """Why the engine's process ended, from its exit code, in words: ``"killed by SIGKILL
    (the system's out-of-memory killer ...)"``, ``"exited with code 1"``."""
    for code in getattr(engine, "exit_codes", None) or []:
        if code is None or code == 0:
            continue
        if code < 0:
            try:
                which = signal.Signals(-code)
            except ValueError:
                return f"killed by signal {-code}"
            hint = SIGNAL_HINTS.get(which)
            return f"killed by {which.name}" + (f" ({hint})" if hint else "")
        return f"exited with code {code}"
    return "its exit is unknown"


class EngineWorker:
    """Owns one engine on one thread.

    Args:
        opener: Builds the engine; runs on the worker thread (so a notebook's kernel
            stays responsive while vLLM starts).
        on_status: ``on_status(status)`` on each change of the engine's life: starting,
            ready, reopening (busy), failed to start or reopen (error). A request's own
            outcome is its future's.
    """

    def __init__(
        self, opener: Callable[[], Any], on_status: Listener | None = None, max_pending: int = MAX_PENDING
    ) -> None:
        self._opener = opener
        self._on_status = on_status or (lambda status: None)
        self._max_pending = max_pending
        self._pending: "OrderedDict[Any, tuple[Callable, Job]]" = OrderedDict()
        self._unkeyed = itertools.count()
        self._lock = threading.Condition()
        self._closed = False
        self.engine: Any = None
        self.ready: Future = Future()
        #: Requests that reached the engine (for coalescing tests and benchmarks).
        self.served = 0
        self.opened = 0
        self._thread = threading.Thread(target=self._run, name="nnterp-widgets-engine", daemon=True)
        self._thread.start()

    # -- client side -------------------------------------------------------------

    def submit(self, key: str | None, fn: Callable[..., Any], job: Job | None = None) -> Job:
        """Queue ``fn(engine, job)`` under ``key``; a waiting request under ``key`` is
        superseded. ``key=None``: a request of its own, never superseded."""
        future = job if job is not None else Job()
        if key is None:
            key = ("unkeyed", next(self._unkeyed))
        with self._lock:
            if self._closed:
                raise RuntimeError("this session is closed")
            previous = self._pending.get(key)
            if previous is None and len(self._pending) >= self._max_pending:
                raise Busy(f"{len(self._pending)} requests are already waiting; try again shortly")
            # A superseded request keeps its place in the queue; only the newest runs.
            self._pending[key] = (fn, future)
            self._lock.notify()
        if previous is not None:  # its callbacks run outside the lock (they may submit)
            previous[1].set_exception(Superseded(f"a newer {key!r} request replaced this one"))
        return future

    def drop(self, which: Callable[[str], bool]) -> int:
        """Supersede every waiting request whose key ``which`` accepts; returns how many."""
        with self._lock:
            keys = [key for key in self._pending if isinstance(key, str) and which(key)]
            dropped = [(key, self._pending.pop(key)[1]) for key in keys]
        for key, future in dropped:
            future.set_exception(Superseded(f"a newer prompt replaced this {key!r} request"))
        return len(dropped)

    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def close(self, close_engine: bool = True) -> None:
        """Stop serving (waiting requests end with an error); close the engine unless told not to."""
        with self._lock:
            self._closed = True
            dropped = [future for _, future in self._pending.values()]
            self._pending.clear()
            self._lock.notify()
        for future in dropped:
            future.set_exception(RuntimeError("the session closed before this request ran"))
        self._thread.join(timeout=60)
        engine, self.engine = self.engine, None
        if engine is not None and close_engine:
            engine.close()

    # -- worker thread -------------------------------------------------------------

    def _open(self) -> None:
        self._on_status(STARTING)
        self.engine = self._opener()
        self.opened += 1
        self._on_status(READY)

    def _run(self) -> None:
        try:
            self._open()
            self.ready.set_result(self.engine)
        except BaseException as error:  # noqa: BLE001 - reported, the thread ends
            self._on_status(Status(State.ERROR, f"the engine failed to start: {error}"))
            self.ready.set_exception(error)
            with self._lock:
                self._closed = True
                dropped = [future for _, future in self._pending.values()]
                self._pending.clear()
            for future in dropped:
                future.set_exception(error)
            return
        while True:
            with self._lock:
                while not self._pending and not self._closed:
                    self._lock.wait()
                if self._closed:
                    return
                key, (fn, future) = self._pending.popitem(last=False)
            if not future.begin():
                continue
            self._serve(key, fn, future)

    def _serve(self, key: Any, fn: Callable, future: Job) -> None:
        if self.engine is None or not getattr(self.engine, "alive", True):
            try:
                self._reopen(f"the engine's process had died: {death_cause(self.engine)}")
            except BaseException as error:  # noqa: BLE001 - the next request tries again
                self._on_status(Status(State.ERROR, f"the engine could not be reopened: {error}"))
                future.set_exception(error)
                return
        try:
            self.served += 1
            result = fn(self.engine, future)
        except Stopped:
            future.end_cancelled()
            return
        except BaseException as error:  # noqa: BLE001 - delivered to the one who asked
            if not getattr(self.engine, "alive", True):
                cause = death_cause(self.engine)
                future.set_exception(
                    EngineDied(
                        f"the engine's process died while serving {key!r}: {cause}; "
                        "it is being reopened, and the next request will be served"
                    )
                )
                try:
                    self._reopen(f"the engine's process died: {cause}")
                except BaseException as reopen_error:  # noqa: BLE001
                    self._on_status(Status(State.ERROR, f"the engine could not be reopened: {reopen_error}"))
                return
            done, total = future.progress
            if total is not None and total > 1:
                error.add_note(f"it failed after {done} of {total} ({key!r}); job.partial() holds what was done")
            error.__notes__ = getattr(error, "__notes__", []) + [traceback.format_exc(limit=3)]
            future.set_exception(error)
            return
        if future.stop_asked:  # cancelled while its one chunk ran: its answer is not wanted
            future.end_cancelled()
            return
        future.finish(result)

    def _reopen(self, why: str) -> None:
        self._on_status(Status(State.BUSY, f"{why}; reopening it"))
        engine, self.engine = self.engine, None
        try:
            if engine is not None:
                engine.close()
        except Exception:  # noqa: BLE001 - it is already gone
            pass
        self._open()
