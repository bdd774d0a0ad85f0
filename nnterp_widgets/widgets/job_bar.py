"""`JobBar`: a view's running request, live: done / total, elapsed, an estimate of what is
left, and a stop button.

    bar = JobBar()
    bar.follow(job, kernel)      # on the kernel's thread, when the view asks
    bar.stop_button.click()      # job.cancel(): the engine stops at the request's next chunk

It stays hidden for a request that answers within `SHOW_AFTER_S` (most do), and hides
when the job ends. A ticker thread asks the kernel's thread to redraw it every `TICK_S`
while the job runs (`KernelThread`: the kernel's loop, or at once where none runs).
"""

from __future__ import annotations

import threading
from typing import Any

import ipywidgets

from .lifecycle import KernelThread

#: A request that answers sooner shows no bar.
SHOW_AFTER_S = 1.0
#: Seconds between redraws of a running job's bar.
TICK_S = 0.25


def job_line(done: int, total: int | None, elapsed: float, remaining: float | None) -> str:
    """What the bar says: ``"37 / 312 · 4.1 s · about 30 s left"``."""
    count = f"{done} / {total}" if total else f"{done}"
    left = "" if remaining is None else f" · about {remaining:.0f} s left"
    return f"{count} · {elapsed:.1f} s{left}"


class JobBar(ipywidgets.HBox):
    """The running request of one view (see the module's docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        self.bar = ipywidgets.FloatProgress(value=0.0, min=0.0, max=1.0, layout=ipywidgets.Layout(width="180px"))
        self.label = ipywidgets.Label("")
        self.stop_button = ipywidgets.Button(
            description="stop", icon="stop", tooltip="stop this request at its next chunk", layout={"width": "80px"}
        )
        self.stop_button.on_click(lambda button: self.stop())
        self._job = None
        super().__init__([self.bar, self.label, self.stop_button], **kwargs)
        self.add_class("nnw-job-bar")
        self.layout.display = "none"

    @property
    def job(self):
        """The job followed (the newest the view asked), or None."""
        return self._job

    def follow(self, job, kernel: KernelThread) -> None:
        """Show ``job``'s progress from now on (a newer job replaces an older one)."""
        self._job = job
        self._draw()

        def tick() -> None:
            while self._job is job and not job.done():
                if job.elapsed or job.progress[0]:
                    kernel.call(self._draw)
                threading.Event().wait(TICK_S)
            kernel.call(self._draw)

        threading.Thread(target=tick, name="nnterp-widgets-job-bar", daemon=True).start()

    def stop(self) -> None:
        """Cancel the job followed: the engine stops at its next chunk."""
        if self._job is not None:
            self._job.cancel()

    def _draw(self) -> None:
        job = self._job
        if job is None or job.done():
            self.layout.display = "none"
            return
        done, total = job.progress
        elapsed = job.elapsed
        self.bar.value = done / total if total else 0.0
        self.label.value = job_line(done, total, elapsed, job.remaining())
        self.stop_button.disabled = job.stop_asked
        self.layout.display = "" if elapsed >= SHOW_AFTER_S else "none"
