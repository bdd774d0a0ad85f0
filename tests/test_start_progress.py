"""The engine start's progress bar is changed only on the kernel's thread (a widget in a
notebook), though the start runs on the session's worker thread."""

from __future__ import annotations

import asyncio
import threading

from nnterp_widgets.session import session as session_module


class _Recorder:
    """Stands in for the tqdm bar: records which thread called each method."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.n, self.total = 0, 2

    def __getattr__(self, name):
        return lambda *args, **kwargs: self.calls.append((name, threading.get_ident()))


def test_changes_from_the_worker_thread_land_on_the_loops_thread():
    async def run():
        progress = session_module._StartProgress("a model")
        recorder = _Recorder()
        progress._bar.close()
        progress._bar = recorder
        worker = threading.Thread(
            target=lambda: (progress.note("tree ready"), progress.step("starting"), progress.close("ready"))
        )
        worker.start()
        worker.join()
        await asyncio.sleep(session_module.TICK_S * 2)
        return recorder.calls, threading.get_ident(), worker.ident

    calls, loop_thread, worker_thread = asyncio.run(run())
    names = [name for name, _ in calls]
    assert {"set_description_str", "update", "close"} <= set(names)
    assert {thread for _, thread in calls} == {loop_thread} and loop_thread != worker_thread
    assert names.index("close") > names.index("update")  # in the order they were asked


def test_without_a_loop_the_bar_is_changed_at_once():
    progress = session_module._StartProgress("a model")
    recorder = _Recorder()
    progress._bar.close()
    progress._bar = recorder
    progress.step("starting")
    assert [name for name, _ in recorder.calls] == ["set_description_str", "update"]
    progress.close("ready")
    assert recorder.calls[-1][0] == "close"
