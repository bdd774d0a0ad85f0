"""`Job`: a session request's future, with progress, a partial answer and a cancel that
stops running work.

    job = session.occlude(prompt, " Paris")        # a Job[Occlusion], queued at once
    job.progress                                    # (done, total): (64, 313)
    job.partial()                                   # an Occlusion of the positions done, or None
    job.cancel()                                    # stops at the next chunk; job.cancelled() is True
    job.result()                                    # the whole Occlusion (or raises)

A `Job` is a `concurrent.futures.Future`: ``result``, ``add_done_callback`` and
``concurrent.futures.wait`` work as on any future. It is also the request's `Progress`:
the engine-side function reports to it between chunks, and a cancel asked while it runs
is honoured there (`Stopped`), so the engine is free for the next request within one
chunk's time. A request that fails mid-way keeps its partial answer readable.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, InvalidStateError
from typing import Any, Callable, Generic, TypeVar

from ..requests.progress import Progress, Stopped

R = TypeVar("R")


class Job(Future, Progress, Generic[R]):
    """A request's future (see the module's docstring). Typed by its result: `Job[Occlusion]`."""

    def __init__(self, what: str = "request") -> None:
        super().__init__()
        self.what = what
        self._stop = threading.Event()
        self._progress: tuple[int, int | None] = (0, 1)  # one chunk, until the request says more
        self._partial: Callable[[], Any] | None = None
        self._watchers: list[Callable[[Job], None]] = []
        self.started_at: float | None = None
        self._on_cancel: Callable[[], None] | None = None  # a chain's: cancels its running part

    # -- what the asker reads ----------------------------------------------------------

    @property
    def progress(self) -> tuple[int, int | None]:
        """``(done, total)`` in the request's own units (a one-trace request: ``(0, 1)``, then
        ``(1, 1)``; a chunked one says its total when it starts)."""
        return self._progress

    def partial(self) -> R | None:
        """The result of what is done so far (the final type), or None before the first chunk."""
        if self.done() and not self.cancelled() and self.exception() is None:
            return self.result()
        maker = self._partial
        return None if maker is None else maker()

    @property
    def elapsed(self) -> float:
        """Seconds since the engine began this request (0 while it waits)."""
        return 0.0 if self.started_at is None else time.monotonic() - self.started_at

    def remaining(self) -> float | None:
        """Seconds left, estimated from the pace so far; None until a chunk is done."""
        done, total = self._progress
        if not done or not total or self.started_at is None:
            return None
        return self.elapsed * (total - done) / done

    def cancel(self) -> bool:
        """Stop this request: at once if it waits, at its next chunk boundary if it runs.

        Returns:
            True if it is (or will be) cancelled; False if it had already finished.
        """
        if self._on_cancel is not None and not self.done():
            self._on_cancel()
            if not self.done():
                self.end_cancelled()
            return True
        if super().cancel():
            return True
        if self.done():
            return self.cancelled()
        self._stop.set()
        return True

    def on_progress(self, watcher: Callable[["Job"], None]) -> Callable[[], None]:
        """Call ``watcher(job)`` after each chunk (on the engine's thread); returns the unsubscribe."""
        self._watchers.append(watcher)
        return lambda: self._watchers.remove(watcher) if watcher in self._watchers else None

    def then(self, next_job: Callable[[R], "Job"]) -> "Job":
        """A job for what comes after this one: ``next_job(result)`` asks the next request
        once this one is done (on the engine's thread), and the returned job ends as that
        one does. An error, a cancel or a supersession of either ends it the same way;
        cancelling it cancels whichever is running."""
        chained: Job = Job(self.what)
        chained.set_running_or_notify_cancel()
        current: list[Future] = [self]

        chained.cancels([lambda: current[0].cancel()])

        def relay(done: Future, last: bool) -> None:
            if chained.done():
                return
            if done.cancelled():
                chained.end_cancelled()
            elif done.exception() is not None:
                chained.set_exception(done.exception())
            elif last:
                chained.finish(done.result())
            else:
                try:
                    following = next_job(done.result())
                except Exception as error:  # noqa: BLE001 - e.g. Busy: the chain's error
                    chained.set_exception(error)
                    return
                current[0] = following
                following.add_done_callback(lambda job: relay(job, True))

        self.add_done_callback(lambda job: relay(job, False))
        return chained

    def mirror(self, other: "Job") -> None:
        """Report ``other``'s progress and partial answer as this job's own (a job made of
        several requests follows its long one)."""

        def copy(job: Job) -> None:
            self.started_at = job.started_at
            self._progress = job.progress
            self._partial = job.partial
            for watcher in list(self._watchers):
                watcher(self)

        other.on_progress(copy)

    def cancels(self, parts: list[Callable[[], Any]]) -> None:
        """Cancelling this job calls each of ``parts`` (the cancels of the requests it is made of)."""
        self._on_cancel = lambda: [cancel() for cancel in parts]

    def show_progress(self) -> "Job[R]":
        """Draw a tqdm bar of this job's progress (text in a script, a widget in a notebook)."""
        from tqdm.auto import tqdm

        bar = tqdm(total=None, desc=self.what, leave=True)

        def update(job: "Job") -> None:
            done, total = job.progress
            if total is not None and bar.total != total:
                bar.total = total
            bar.n = done
            bar.refresh()

        self.on_progress(update)
        self.add_done_callback(lambda job: (update(job), bar.close()))
        return self

    # -- what the request reports (the engine's thread) -----------------------------------

    def start(self, total: int) -> None:
        """The request's size; said again when it learns more (what is done is kept)."""
        self._progress = (self._progress[0], int(total))
        self._check()

    def advance(self, count: int, partial: Callable[[], Any] | None = None) -> None:
        """``count`` units are done; ``partial()`` builds the result so far. Raises `Stopped`
        once the job is cancelled."""
        self._progress = (int(count), self._progress[1])
        if partial is not None:
            self._partial = partial
        for watcher in list(self._watchers):
            try:
                watcher(self)
            except Exception:  # noqa: BLE001 - a display's error must not stop the engine
                pass
        self._check()

    def _check(self) -> None:
        if self._stop.is_set():
            raise Stopped(f"the {self.what} was cancelled")

    # -- the worker's side ---------------------------------------------------------------

    @property
    def stop_asked(self) -> bool:
        return self._stop.is_set()

    def begin(self) -> bool:
        """The worker takes it: False if it was cancelled while it waited."""
        if not self.set_running_or_notify_cancel():
            return False
        self.started_at = time.monotonic()
        if self._stop.is_set():
            self.end_cancelled()
            return False
        return True

    def end_cancelled(self) -> None:
        """Resolve a running job as cancelled (it stopped at a chunk boundary)."""
        with self._condition:
            if self._state not in ("RUNNING", "PENDING"):
                raise InvalidStateError(f"{self.what} has already finished")
            self._state = "CANCELLED_AND_NOTIFIED"
            for waiter in self._waiters:
                waiter.add_cancelled(self)
            self._condition.notify_all()
        self._invoke_callbacks()

    def finish(self, result: Any) -> None:
        total = self._progress[1]
        self._progress = (total if total is not None else 1, total if total is not None else 1)
        self.set_result(result)


def gather(jobs: list[Job]) -> Job:
    """One job for several requests: their results as a tuple once every one is done, or
    the error of the first (in ``jobs``' order) that failed. Its progress and partial answer
    are the first job's (a sweep beside its pair's lens); cancelling it cancels them all."""
    combined: Job = Job(jobs[0].what)
    combined.set_running_or_notify_cancel()
    combined.mirror(jobs[0])
    combined.cancels([job.cancel for job in jobs])
    left = [len(jobs)]
    lock = threading.Lock()

    def one_done(_) -> None:
        with lock:
            left[0] -= 1
            if left[0]:
                return
        if combined.done():
            return
        for job in jobs:
            if job.cancelled():
                combined.end_cancelled()
                return
            if job.exception() is not None:
                combined.set_exception(job.exception())
                return
        combined.finish(tuple(job.result() for job in jobs))

    for job in jobs:
        job.add_done_callback(one_done)
    return combined


def resolved(value: Any, what: str = "request") -> Job:
    """A job already done with ``value`` (a cached answer: no engine request)."""
    job: Job = Job(what)
    job.set_running_or_notify_cancel()
    job.finish(value)
    return job
