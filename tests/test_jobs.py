"""Jobs without an engine: the session's worker serving chunked requests on a stand-in
engine object (the worker never looks inside it), and `Job`'s progress, partial answer,
cancel and chaining. What runs on vLLM is tested with the engine in test_session.py."""

from __future__ import annotations

import threading
import time

import pytest

from nnterp_widgets.requests.progress import CHUNK_S, MOST_FIXED_SHARE, MOST_GROWTH, NO_PROGRESS, Pace, Stopped
from nnterp_widgets.session import Job, Superseded, resolved
from nnterp_widgets.session.worker import EngineWorker


class _Engine:
    alive = True

    def close(self) -> None:
        pass


@pytest.fixture
def worker():
    worker = EngineWorker(lambda: _Engine())
    worker.ready.result(10)
    yield worker
    worker.close()


def chunked(chunks: int, seconds: float = 0.0, fail_at: int | None = None, started=None):
    """A request of ``chunks`` chunks: its partial answer is the list of chunks done."""

    def run(engine, progress):
        done: list[int] = []
        progress.start(chunks)
        if started is not None:
            started.set()
        for index in range(chunks):
            if index == fail_at:
                raise ValueError(f"chunk {index} broke")
            time.sleep(seconds)
            done.append(index)
            progress.advance(len(done), lambda: list(done))
        return done

    return run


def test_progress_and_partial_follow_the_chunks(worker):
    seen = []
    job = Job("test")
    job.on_progress(lambda j: seen.append((j.progress, j.partial())))
    worker.submit(None, chunked(3), job)
    assert job.result(10) == [0, 1, 2]
    assert seen == [((1, 3), [0]), ((2, 3), [0, 1]), ((3, 3), [0, 1, 2])]
    assert job.progress == (3, 3) and job.partial() == [0, 1, 2]


def test_a_job_before_its_first_chunk_has_no_partial_answer():
    job = Job("test")
    assert job.progress == (0, 1) and job.partial() is None and job.remaining() is None
    job.set_running_or_notify_cancel()
    job.start(5)
    assert job.progress == (0, 5) and job.partial() is None


def test_cancel_stops_running_work_at_the_next_chunk_and_the_next_request_runs_at_once(worker):
    started = threading.Event()
    job = worker.submit(None, chunked(1000, seconds=0.01, started=started), Job("long"))
    assert started.wait(10)
    time.sleep(0.05)
    asked = time.monotonic()
    assert job.cancel() is True
    following = worker.submit(None, lambda engine, progress: "next")
    assert following.result(10) == "next"
    assert time.monotonic() - asked < 2  # within a chunk's time, not the 10 s the whole would take
    assert job.cancelled() and job.done()
    done, total = job.progress
    assert 0 < done < total == 1000
    assert job.partial() == list(range(done))  # what was done stays readable


def test_cancel_of_a_waiting_job_runs_nothing(worker):
    gate = threading.Event()
    worker.submit("busy", lambda engine, progress: gate.wait(10))
    ran = []
    job = worker.submit(None, lambda engine, progress: ran.append(1))
    assert job.cancel() and job.cancelled()
    gate.set()
    assert worker.submit(None, lambda engine, progress: "after").result(10) == "after"
    assert ran == []


def test_cancelling_a_finished_job_is_a_no_op_and_one_cancel_touches_no_other(worker):
    first = worker.submit(None, lambda engine, progress: 1)
    assert first.result(10) == 1
    assert first.cancel() is False and not first.cancelled() and first.result() == 1
    started = threading.Event()
    long = worker.submit(None, chunked(200, seconds=0.01, started=started), Job("long"))
    other = worker.submit(None, chunked(3), Job("other"))
    assert started.wait(10)
    long.cancel()
    assert long.cancel() is True  # again: still cancelled, nothing more
    assert other.result(10) == [0, 1, 2] and not other.cancelled()


def test_a_failure_mid_way_keeps_the_partial_answer_and_says_where(worker):
    job = worker.submit(None, chunked(5, fail_at=3), Job("sweep"))
    with pytest.raises(ValueError, match="chunk 3 broke") as caught:
        job.result(10)
    assert job.partial() == [0, 1, 2] and job.progress == (3, 5)
    assert any("after 3 of 5" in note for note in caught.value.__notes__)


def test_requests_without_a_key_are_never_superseded(worker):
    gate = threading.Event()
    worker.submit(None, lambda engine, progress: gate.wait(10))
    jobs = [worker.submit(None, lambda engine, progress, i=i: i) for i in range(3)]
    keyed = [worker.submit("view", lambda engine, progress, i=i: i) for i in range(3)]
    gate.set()
    assert [job.result(10) for job in jobs] == [0, 1, 2]
    assert keyed[-1].result(10) == 2
    for job in keyed[:-1]:
        with pytest.raises(Superseded):
            job.result(10)


def test_then_chains_two_requests_as_one_job(worker):
    chained = worker.submit(None, lambda engine, progress: 2).then(
        lambda two: worker.submit(None, lambda engine, progress: two * 21)
    )
    assert chained.result(10) == 42


def test_then_carries_the_first_error_and_a_cancel_reaches_the_running_part(worker):
    def broken(engine, progress):
        raise RuntimeError("no vector")

    failed = worker.submit(None, broken).then(lambda v: resolved(v))
    with pytest.raises(RuntimeError, match="no vector"):
        failed.result(10)
    started = threading.Event()
    running: list[Job] = []

    def second(value):
        running.append(worker.submit(None, chunked(500, seconds=0.01, started=started), Job("second")))
        return running[0]

    chained = worker.submit(None, lambda engine, progress: 1).then(second)
    assert started.wait(10)
    assert chained.cancel() and chained.cancelled()
    assert worker.submit(None, lambda engine, progress: "free").result(10) == "free"
    assert running[0].cancelled()


def test_no_progress_never_stops_a_request():
    NO_PROGRESS.start(3)
    NO_PROGRESS.advance(1, lambda: None)  # nothing watches: no error, no stop
    with pytest.raises(Stopped):
        job = Job("x")
        job.set_running_or_notify_cancel()
        job.cancel()
        job.advance(1)


def test_gather_answers_every_part_follows_the_first_and_cancels_them_all(worker):
    from nnterp_widgets.session import gather

    both = gather([worker.submit(None, chunked(3)), worker.submit(None, lambda engine, progress: "pair")])
    seen = []
    assert both.result(10) == ([0, 1, 2], "pair")
    started = threading.Event()
    long = worker.submit(None, chunked(500, seconds=0.01, started=started), Job("sweep"))
    other = Job("pair")
    together = gather([long, other])
    together.on_progress(lambda j: seen.append(j.progress))
    assert started.wait(10)
    while not seen:
        time.sleep(0.01)
    assert seen[-1][1] == 500 and together.partial()  # the sweep's rows so far
    together.cancel()
    assert together.cancelled() and other.cancelled()
    assert worker.submit(None, lambda engine, progress: "free").result(10) == "free"
    assert long.cancelled()


def test_a_one_trace_request_cancelled_while_it_runs_ends_cancelled(worker):
    started, release = threading.Event(), threading.Event()

    def one_trace(engine, progress):
        started.set()
        release.wait(10)
        return "the answer nobody wants"

    job = worker.submit(None, one_trace, Job("prompt"))
    assert job.progress == (0, 1) and started.wait(10)
    assert job.cancel() is True
    release.set()
    assert worker.submit(None, lambda engine, progress: "next").result(10) == "next"
    assert job.cancelled()


def _paced(pace: Pace, total: int, seconds_of) -> list[tuple[int, float]]:
    """Chunks of ``total`` items sized by ``pace``, each taking ``seconds_of(size)``."""
    chunks = []
    while total > 0:
        size = min(pace.next(), total)
        chunks.append((size, seconds_of(size)))
        pace.took(*chunks[-1])
        total -= size
    return chunks


def test_a_pace_of_items_alone_fills_a_chunk_and_holds_it():
    chunks = _paced(Pace(first=2, most=1000), 200, lambda size: 0.05 * size)
    assert [size for size, _ in chunks[1:5]] == [20] * 4
    assert all(seconds <= CHUNK_S + 1e-9 for _, seconds in chunks)


def test_a_chunk_with_a_fixed_start_grows_past_one_item_and_keeps_the_start_to_half():
    """A batch's generation on the CPU: each chunk re-reads its sequences (2.1 s) before
    its steps (0.15 s each); sized by items alone every chunk would be one step, all
    re-reading."""
    fixed, each = 2.1, 0.15
    chunks = _paced(Pace(first=2, most=64), 64, lambda size: fixed + each * size)
    sizes = [size for size, _ in chunks]
    assert sizes[:2] == [2, 1]  # the first chunk, then a pace of items alone (2.4 s for 2)
    assert max(sizes) > 1 and len(chunks) < 64 / 4
    assert all(later <= MOST_GROWTH * earlier for earlier, later in zip(sizes, sizes[1:], strict=False))
    for _, seconds in chunks:  # no chunk longer than its start's share asks
        assert seconds <= fixed / MOST_FIXED_SHARE + each
    for size, _ in chunks[3:-1]:  # once fitted, the steps take about as long as the start
        assert size * each >= fixed - each - 1e-9


def test_a_fit_that_makes_no_sense_is_a_pace_of_items():
    pace = Pace(first=2, most=1000)
    pace.took(2, 0.5)
    pace.took(20, 0.4)  # more items in less time: no per-item part to fit
    assert pace.next() == int(CHUNK_S / (0.4 / 20))
