"""A widget's life without an engine: answers on the kernel's thread, one status type,
close() closing what a widget holds."""

from __future__ import annotations

import asyncio
import threading

import pytest

from nnterp_widgets import AttentionView, LogitLens
from nnterp_widgets.session import IDLE, State, Status
from nnterp_widgets.widgets.lifecycle import KernelThread


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
