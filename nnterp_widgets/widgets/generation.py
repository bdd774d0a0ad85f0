"""`GenerationView`: generate N tokens from a prompt and step through the generation's lens.

One engine request per "generate" (the session's ``generate``); the step slider only
re-outlines the step's column of the figure (`generation_lens_figure`), asking nothing.
A refused request (``max_tokens`` of 0, negative, or past the model's length) shows the
session's error in the message line; the next request is served as usual.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import ipywidgets
import plotly.graph_objects as go

from ..session.generation import GENERATE_TOKENS, GenerationResult
from .generation_figures import generation_lens_figure
from .lifecycle import KernelThread, close_all
from .plot_panel import show_figure

__all__ = ["GenerationView", "PREFILL_NOTE"]

#: Said beside the generation: the other panels show the prompt's own forward pass.
PREFILL_NOTE = "the panels above show the prompt (the prefill); this figure shows every generation step"


class GenerationView(ipywidgets.VBox):
    """``GenerationView(session, prompt=lambda: "text", key="generate")``: ``prompt`` gives
    the text to continue when "generate" is pressed (the explorer's prompt box)."""

    def __init__(self, session: Any, prompt: Callable[[], str], key: str = "generate", **kwargs: Any) -> None:
        self.session = session
        self._prompt = prompt
        self.key = key
        self.result: GenerationResult | None = None
        self._kernel = KernelThread()
        self._idle = threading.Event()
        self._idle.set()
        self._error: BaseException | None = None
        self._asked = 0
        self.tokens_input = ipywidgets.IntText(
            value=GENERATE_TOKENS, description="tokens", layout=ipywidgets.Layout(width="150px")
        )
        self.generate_button = ipywidgets.Button(description="generate", tooltip="generate this many tokens")
        self.step_slider = ipywidgets.IntSlider(
            value=0, min=0, max=0, description="step", disabled=True, continuous_update=True
        )
        self.message = ipywidgets.Label("")
        self.note = ipywidgets.Label(PREFILL_NOTE)
        self.figure = go.FigureWidget()
        self.generate_button.on_click(lambda button: self.generate(self.tokens_input.value))
        self.step_slider.observe(lambda change: self._render(), "value")
        super().__init__(
            [
                ipywidgets.HBox([self.tokens_input, self.generate_button, self.step_slider]),
                self.message,
                self.note,
                self.figure,
            ],
            **kwargs,
        )

    @property
    def step(self) -> int:
        return self.step_slider.value

    def generate(self, max_tokens: Any) -> None:
        """Ask for ``max_tokens`` tokens after the prompt; shown when the answer lands."""
        self._asked += 1
        asked = self._asked
        self._idle.clear()
        self._error = None
        self.message.value = f"… generating {max_tokens} tokens"
        try:
            future = self.session.generate(self._prompt(), max_tokens=max_tokens, key=self.key)
        except Exception as error:  # noqa: BLE001 - shown, not raised into the comm
            self._failed(error)
            return
        future.add_done_callback(lambda done: self._kernel.call(self._landed, asked, done))

    def wait(self, timeout: float | None = 300) -> GenerationResult | None:
        """Block until the newest request is shown (for scripts and tests); re-raises its error."""
        if not self._idle.wait(timeout):
            raise TimeoutError(f"no generation from the engine within {timeout} s")
        if self._error is not None:
            raise self._error
        return self.result

    def _landed(self, asked: int, future) -> None:
        if asked != self._asked or future.cancelled():
            return  # a newer request is on its way
        error = future.exception()
        if error is not None:
            if type(error).__name__ != "Superseded":
                self._failed(error)
            return
        self.result = result = future.result()
        last = len(result.steps) - 1
        self.step_slider.unobserve_all("value")
        self.step_slider.max = last
        self.step_slider.value = min(self.step_slider.value, last)
        self.step_slider.disabled = False
        self.step_slider.observe(lambda change: self._render(), "value")
        self._render()
        self.message.value = f"{len(result.steps)} steps wrote {result.text!r}"
        self._idle.set()

    def _failed(self, error: BaseException) -> None:
        self._error = error
        self.message.value = f"⚠ {type(error).__name__}: {error}"
        self._idle.set()

    def _render(self) -> None:
        if self.result is not None:
            show_figure(self.figure, generation_lens_figure(self.result, self.step))

    def close(self) -> None:
        close_all(self.children)
        super().close()
