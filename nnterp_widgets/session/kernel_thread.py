"""The kernel's thread: the one thread that may touch widgets.

A session's work runs on its engine's thread, but a notebook's widgets (the start's
progress bar, every view) send comm messages and must be changed from the kernel's own
thread, the one running its asyncio loop. `KernelThread`, made on that thread, hands a
call to its loop; where no loop runs (a script, a test) there is no loop to hand to, and
the call runs at once.

Example::

    kernel = KernelThread()  # on the kernel's thread
    future.add_done_callback(lambda done: kernel.call(show, done))
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

__all__ = ["KernelThread", "running_loop"]


def running_loop() -> asyncio.AbstractEventLoop | None:
    """This thread's running asyncio loop, or None."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class KernelThread:
    """Made on the kernel's thread; ``call(fn, *args)`` runs ``fn`` there."""

    def __init__(self) -> None:
        #: The kernel's loop (None where none runs).
        self.loop = running_loop()

    def here(self) -> bool:
        """Whether this is the kernel's thread (or no loop runs: nothing to hand over to)."""
        loop = self.loop
        return loop is None or loop.is_closed() or running_loop() is loop

    def call(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the kernel's thread: now if this is it, else on its loop."""
        if self.here():
            fn(*args)
        else:
            self.loop.call_soon_threadsafe(fn, *args)
