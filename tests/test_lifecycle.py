"""A widget's life without an engine: answers on the kernel's thread, one status type,
close() closing what a widget holds."""

from __future__ import annotations

import asyncio
import threading
import time

import ipywidgets
import pytest
import traitlets

from nnterp_widgets import AttentionView, LogitLens
from nnterp_widgets.session import IDLE, State, Status
from nnterp_widgets.session.worker import EngineWorker
from nnterp_widgets.widgets.lifecycle import KernelThread, OneAtATime


def test_answers_from_another_thread_run_on_the_loops_thread():
    """In a kernel the answer is handed to its loop, as the engine's worker does."""

    async def kernel():
        here = KernelThread()
        ran, done = [], asyncio.Event()

        def answer():
            ran.append(threading.get_ident())
            done.set()

        worker = threading.Thread(target=here.call, args=(answer,))
        worker.start()
        worker.join()
        assert ran == []  # queued on the loop, not run on the worker
        await asyncio.wait_for(done.wait(), 30)
        return ran, here.here()

    ran, here = asyncio.run(kernel())
    assert ran == [threading.get_ident()] and here


def test_without_a_loop_answers_run_at_once():
    """In a script there is no loop to hand over to: the answer runs where it arrives."""
    here, ran = KernelThread(), []
    worker = threading.Thread(target=here.call, args=(lambda: ran.append(threading.get_ident()),))
    worker.start()
    worker.join()
    assert ran == [worker.ident]


class _Engine:
    """What the worker needs of an engine: its queue is what is tested, not vLLM."""

    def close(self) -> None:
        pass


class _Counter(OneAtATime, ipywidgets.Widget):
    value = traitlets.Int(0)


def test_without_a_loop_an_answer_waits_for_the_scripts_change_to_end():
    """A script's trait change and an answer from the engine's thread do not interleave
    (two threads updating one plotly figure at once broke its batch update)."""
    widget, here, order = _Counter(), KernelThread(), []
    entered = threading.Event()

    def changed(change):
        order.append("change starts")
        entered.set()
        time.sleep(0.3)  # an answer arriving now must wait
        order.append("change ends")

    widget.observe(changed, "value")
    worker = threading.Thread(target=lambda: (entered.wait(30), here.call(order.append, "answer")))
    worker.start()
    widget.value = 1
    worker.join(30)
    assert order == ["change starts", "change ends", "answer"]


def test_a_superseded_requests_callbacks_run_outside_the_workers_lock():
    """A callback may ask again (a view's answer starts the next request): run under the
    worker's lock it would deadlock against the engine's thread showing an answer."""
    release = threading.Event()
    worker = EngineWorker(lambda: _Engine())
    try:
        worker.submit("busy", lambda engine, job: release.wait(30))  # holds the engine's thread
        first = worker.submit("k", lambda engine, job: "first")
        seen = []

        def superseded(done):
            other = threading.Thread(target=lambda: seen.append(worker.pending()))
            other.start()
            other.join(5)  # blocks if this callback holds the worker's lock

        first.add_done_callback(superseded)
        second = worker.submit("k", lambda engine, job: "second")
        assert seen == [1] or seen == [2], seen
        release.set()
        assert second.result(30) == "second"
    finally:
        release.set()
        worker.close()


def test_one_status_type():
    assert Status("busy", "running").to_json() == {"state": "busy", "message": "running"}
    assert Status(State.ERROR, "engine died").text == "error: engine died"
    assert Status(State.BUSY).text == "busy…" and IDLE.text == "" and IDLE.state is State.IDLE
    with pytest.raises(ValueError):
        Status("reopening")


def test_close_closes_what_a_panel_holds():
    for panel in (AttentionView(), LogitLens()):
        held = [panel.figure, panel.message, panel.status_label]
        panel.close()
        assert panel.comm is None and all(widget.comm is None for widget in held)
