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
from typing import Any, Callable

__all__ = ["KernelThread", "close_all", "show_pending"]


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


def close_all(widgets) -> None:
    """Close each widget and, first, every widget it holds (a box does not close its children)."""
    for widget in widgets:
        close_all(getattr(widget, "children", ()))
        widget.close()


def show_pending(view, timeout: float | None) -> None:
    """For a view's ``wait`` in a cell: on the kernel's thread, the loop that would show
    the view's answer is blocked by the waiting cell, so wait for the answer and show it
    here. ``view`` keeps ``_future`` (``(asked, future)``), ``_idle``, ``_kernel`` and
    ``_land(asked, future)``."""
    pending = view._future
    if pending is None or view._idle.is_set() or not view._kernel.here():
        return
    asked, future = pending
    if not concurrent.futures.wait([future], timeout).done:
        raise TimeoutError(f"no answer from the engine within {timeout} s")
    view._land(asked, future)
