"""`OcclusionPanel`: which of the prompt's tokens the answer depends on.

State and rendering only. "occlude" asks the session for every position occluded in turn
(`Session.occlude`: replaced by a neutral token, or dropped; batched) and draws the prompt
as text, each token shaded by the change in the answer (`occlusion_text`, a
`ShadedTextView`: it reads at 300 tokens as at 10), with the strongest listed under it. A
click on a token selects it in the explorer (``selected_token``).
"""

from __future__ import annotations


import ipywidgets

from ..interventions.occlusion import Occlusion
from ..interventions.occlusion import MODES
from ..figures.causal import occlusion_text
from ..figures.html import occlusion_section
from .lifecycle import one_at_a_time
from .tool_view import ToolView
from .plot_panel import PlotPanel
from .shaded_text import ShadedTextView
from .token_box import TokenBox

__all__ = ["OcclusionPanel"]


class OcclusionPanel(ToolView, PlotPanel):
    """``OcclusionPanel(session, prompt, answer=" Paris")``."""

    _shown_as = "occlusion"
    _asks_for = "occlusion"
    _figure_slots = ()

    _default_key = "occlude"
    _run_label = "occlude"
    _run_tooltip = "occlude each token in turn (one batch)"

    _options = {"answer": " Paris"}

    def _connect(self) -> None:
        #: The prompt shaded by the answer's change; on the page from the first answer.
        self.text_view = ShadedTextView()
        self.measure_picker.observe(one_at_a_time(lambda change: self._render()), "value")
        self.text_view.observe(one_at_a_time(self._on_click), "selected")

    def _controls(self) -> list:
        self.answer_box = TokenBox(self.session, self._defaults["answer"], description="answer")
        self.mode_picker = ipywidgets.Dropdown(options=list(MODES), value=MODES[0], description="occlude by")
        self.measure_picker = ipywidgets.Dropdown(options=["logit", "probability"], value="logit", description="show Δ")
        return [ipywidgets.HBox([self.answer_box, self.mode_picker, self.measure_picker, self.run_button])]

    def export_section(self, selected_token: int = -1) -> str:
        return "" if self.occlusion is None else occlusion_section(self.occlusion, self.measure_picker.value)

    @one_at_a_time
    def run(self) -> None:
        """Ask for the occlusion of the prompt toward the answer: one batched request per 64 positions."""
        self.set_status("busy", f"occluding each token ({self.mode_picker.value})")
        answer, mode = self.answer_box.value, self.mode_picker.value
        self._ask(
            lambda: self.session.occlude(self._prompt(), answer, mode, key=self.key), self._landed, partial=self._so_far
        )

    def _so_far(self, occlusion: Occlusion) -> None:
        """A partial answer: the coarse row first, then the refined tokens as they land."""
        self.occlusion = occlusion
        self._render()

    def _landed(self, occlusion: Occlusion) -> None:
        self.occlusion = occlusion
        self._render()
        needed = ", ".join(f"{text!r} {delta:+.2f}" for _, text, delta in occlusion.most_needed(3))
        refined = (
            "" if occlusion.exact.all() else f" · {int(occlusion.exact.sum())} tokens refined alone, the rest by block"
        )
        self.set_status("idle", f"{occlusion.requests} engine requests · most needed: {needed}{refined}")

    def _render(self) -> None:
        if self.occlusion is None:
            return
        self.text_view.show(occlusion_text(self.occlusion, self.measure_picker.value))
        if self.text_view not in self.children:
            self.children = (*self.children, self.text_view)

    def _on_click(self, change) -> None:
        if change["new"] >= 0:
            self.selected_token = change["new"]

    def _on_selected(self, change) -> None:
        self.text_view.selected = change["new"]

    def close(self) -> None:
        self.text_view.close()
        super().close()
