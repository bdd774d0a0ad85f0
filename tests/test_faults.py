"""Faults and load on a real session: a killed engine, a burst of changes, bad inputs."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest
import torch

from nnterp_widgets.engine import parcel, parcels
from nnterp_widgets.session import State
from nnterp_widgets.session.status import READY
from nnterp_widgets.session.worker import MAX_PENDING

PROMPT = "The Eiffel Tower is in"
SESSION_FAMILY = "gpt2"  # the session fixture's model (conftest)


#: The kill test kills the engine's process: the engine runs in vLLM's own processes here.
SESSION_SETTINGS = {"in_process": False}


def _explorer(session):
    """The explorer on ``session``; the rest of this module needs no widget packages (a GPU
    image may lack them, and its engine tests still run)."""
    pytest.importorskip("ipywidgets")
    from nnterp_widgets import Explorer

    return Explorer(session, prompt=PROMPT)


def test_burst_of_200_changes_is_bounded_and_last_wins(session):
    explorer = _explorer(session)
    explorer.wait(120)
    before = session.engine_requests
    peak = 0
    for i in range(200):
        if i % 2:
            explorer.attention.layer = i % 2  # a layer switch: at most one request, then cached
        else:
            explorer.prompt_box.value = f"{PROMPT} {i}"
        peak = max(peak, session._worker.pending())
    result = explorer.wait(120)  # no deadlock: it lands within the bound
    assert result.prompt == f"{PROMPT} 198"
    assert explorer.tree.prompt_tokens == list(result.tokens.texts)
    served = session.engine_requests - before
    assert 1 <= served < 50, served  # coalesced, not one per change
    # One key per kind of request of the explorer (its prompt, a layer, a lens window, a
    # preview): the queue never grows past them, and a new prompt drops the others.
    assert peak <= 4
    assert peak <= MAX_PENDING


def test_bad_inputs_each_followed_by_a_good_request(session):
    explorer = _explorer(session)
    explorer.wait(120)
    for bad, expected in [("", "empty"), ("Paris " * 80, "max_model_len"), ("   \n ", "empty")]:
        explorer.prompt_box.value = bad
        with pytest.raises(Exception, match=expected):
            explorer.wait(60)
        assert expected in explorer.status_line.text
        explorer.prompt_box.value = f"{PROMPT} again"
        assert explorer.wait(120).prompt == f"{PROMPT} again"
        explorer.prompt_box.value = PROMPT
        explorer.wait(120)
    view = explorer.attention
    for name, bad in [("layer", 5), ("layer", -1), ("head", 17), ("head", -3)]:
        kept = getattr(view, name)
        setattr(view, name, bad)
        assert getattr(view, name) == kept  # refused, the view stays
        assert str(bad) in view.message.value  # and says why
        view.layer, view.head = 1, 1  # a good request after it
        assert (view.layer, view.head) == (1, 1)
        assert view.figure.data[0].z is not None


def test_killed_engine_is_reported_reopened_and_serves_the_next_request(session):
    states = []
    unsubscribe = session.on_status(states.append)
    try:
        first = session.prompt(PROMPT, key="fault").result(120)
        engine = session._worker.engine
        (pid,) = engine.engine_pids
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while engine.alive and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not engine.alive
        again = session.prompt(PROMPT, key="fault").result(300)
    finally:
        unsubscribe()
    assert again.tokens == first.tokens
    assert session.engine_opens == 2
    assert any(
        status.state is State.BUSY and "died" in status.message and "reopening" in status.message for status in states
    )
    # The cause in the same message: the signal, and what it usually means.
    assert any("killed by SIGKILL (the system's out-of-memory killer" in status.message for status in states), [
        status.message for status in states
    ]
    assert states[-1] == READY
    # And it keeps serving afterwards.
    assert session.prompt("The Colosseum is in", key="fault").result(120).tokens.texts[0] == "The"


def test_a_large_array_crosses_from_the_worker_through_shared_memory(session, monkeypatch):
    """The engine's processes write a large result to shared memory and the kernel reads
    it back whole (`engine.parcels`): the same values, the file gone after."""
    opened = []
    unparcel = parcels._unparcel

    def counted(*args):
        opened.append(args[0])
        return unparcel(*args)

    monkeypatch.setattr(parcels, "_unparcel", counted)
    count = 3 * parcels.PARCEL_BYTES // 4

    def run(engine):
        with engine.trace(PROMPT, temperature=0.0, max_tokens=1):
            made = torch.arange(count, dtype=torch.float32) + engine.logits[0, -1, 0].float().cpu()
            out = parcel(made.numpy()).save()
            first = engine.logits[0, -1, 0].float().save()
        return out, first

    out, first = session.request(run).result(120)
    assert len(opened) == 1 and not os.path.exists(opened[0])
    assert isinstance(out, np.ndarray) and out.shape == (count,)
    np.testing.assert_array_equal(out, np.arange(count, dtype=np.float32) + np.float32(float(first)))


def test_a_patching_sweep_loads_its_cells_into_the_engines_processes(session):
    """A sweep's cells go to the engine's worker process before its requests run, one
    taken by each request: on an engine in its own processes, patching the last layer's
    last position is the clean run and the shared first token the corrupted one, as in
    process (where transformers holds every cell)."""
    result = session.patch("The Eiffel Tower is in Paris", "The Colosseum Tower is in Paris", " France", " Italy")
    result = result.result(300)
    assert result.requests > 1 and not np.isnan(result.patched).any()
    np.testing.assert_allclose(result.effect[-1, -1], 1.0, atol=1e-4)
    np.testing.assert_allclose(result.effect[:, 0], 0.0, atol=1e-4)
