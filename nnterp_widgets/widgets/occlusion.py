"""`OcclusionPanel`: which of the prompt's tokens the answer depends on (a saliency row).

State and rendering only. "occlude" asks the session for every position occluded in turn
(`Session.occlude`: replaced by a neutral token, or dropped; batched) and draws the row
with `occlusion_figure`. A click on a token selects it in the explorer
(``selected_token``).
"""

from __future__ import annotations

from typing import Any, Callable

import ipywidgets

from ..requests.occlusion import Occlusion
from ..session import Session
from ..requests.occlusion import MODES
from ..figures.causal import occlusion_figure
from .lifecycle import Asking, one_at_a_time
from .plot_panel import FigureSlot, PlotPanel, clicked

__all__ = ["OcclusionPanel"]


class OcclusionPanel(Asking, PlotPanel):
    """``OcclusionPanel(session, prompt, answer=" Paris")``."""

    _shown = "occlusion"
    _asks_for = "occlusion"

    figure = FigureSlot()

    def __init__(
        self,
        session: Session,
        prompt: str | Callable[[], str],
        answer: str = " Paris",
        *,
        key: str = "occlude",
        **kwargs: Any,
    ) -> None:
        self.session = session
        self.key = key
        self._prompt = prompt if callable(prompt) else (lambda: prompt)
        self.occlusion: Occlusion | None = None
        self._init_asking()
        self.answer_box = ipywidgets.Text(value=answer, description="answer", layout=ipywidgets.Layout(width="220px"))
        self.mode_picker = ipywidgets.Dropdown(options=list(MODES), value=MODES[0], description="occlude by")
        self.measure_picker = ipywidgets.Dropdown(options=["logit", "probability"], value="logit", description="show Δ")
        self.run_button = ipywidgets.Button(description="occlude", tooltip="occlude each token in turn (one batch)")
        controls = ipywidgets.HBox([self.answer_box, self.mode_picker, self.measure_picker, self.run_button])
        super().__init__([controls], ("figure",), **kwargs)
        self.run_button.on_click(lambda button: self.run())
        self.measure_picker.observe(one_at_a_time(lambda change: self._render()), "value")

    @property
    def shown_prompt(self) -> str | None:
        """The prompt of the answer shown (None before one)."""
        return None if self.occlusion is None else self.occlusion.text

    @one_at_a_time
    def run(self) -> None:
        """Ask for the occlusion of the prompt toward the answer: one batched request per 64 positions."""
        self.set_status("busy", f"occluding each token ({self.mode_picker.value})")
        answer, mode = self.answer_box.value, self.mode_picker.value
        self._ask(lambda: self.session.occlude(self._prompt(), answer, mode, key=self.key), self._landed)

    def _landed(self, occlusion: Occlusion) -> None:
        self.occlusion = occlusion
        self._render()
        needed = ", ".join(f"{text!r} {delta:+.2f}" for _, text, delta in occlusion.most_needed(3))
        self.set_status("idle", f"{occlusion.requests} engine requests · most needed: {needed}")

    def _render(self) -> None:
        if self.occlusion is None:
            return
        if self._show(self.figure, occlusion_figure(self.occlusion, self.measure_picker.value)):
            self.figure.data[0].on_click(self._on_click)

    def _on_click(self, trace, points, state=None) -> None:
        column = clicked(points, "x")
        if column is not None and self.occlusion is not None and column < len(self.occlusion.tokens):
            self.selected_token = column
