"""`AttributionPanel`: which heads and MLPs wrote the answer (direct logit attribution).

State and rendering only. "attribute" asks the session for one `Attribution` of the
prompt (the explorer's, or the panel's own box) toward ``answer`` against ``foil``
(`Session.attribute`, one engine request) and draws it with `attribution_figure`. A
click on a head selects it (``selected_head``, a ``(layer, head)`` pair); the explorer
shows that head in its attention view. A refused request (an answer that is not one
token, an empty prompt) shows the session's message and the next one is served.
"""

from __future__ import annotations


import ipywidgets
import traitlets

from ..requests.attribution import Attribution
from ..figures.attribution import attribution_figure
from ..figures.html import attribution_section
from .lifecycle import one_at_a_time
from .tool_view import ToolView
from .plot_panel import FigureSlot, PlotPanel, clicked
from .token_box import TokenBox

__all__ = ["AttributionPanel"]


class AttributionPanel(ToolView, PlotPanel):
    """``AttributionPanel(session, prompt, answer=" Paris", foil=" Rome")``.

    ``prompt``: the text, or a function returning it (the explorer passes its prompt
    box's). ``foil`` empty: the metric is logit(answer) alone.
    """

    _shown_as = "attribution"
    _asks_for = "attribution"

    #: The head outlined and shown in the explorer's attention view: ``(layer, head)`` or ``()``.
    selected_head = traitlets.Tuple()

    figure = FigureSlot()

    _default_key = "attribute"
    _run_label = "attribute"
    _run_tooltip = "each head's and MLP's direct effect on the answer's logit"

    _options = {"answer": " Paris", "foil": " Rome"}

    def _connect(self) -> None:
        self.observe(lambda change: self._outline(), "selected_head")

    def _controls(self) -> list:
        answer, foil = self._defaults["answer"], self._defaults["foil"]
        self.answer_box = TokenBox(self.session, answer, description="answer")
        self.foil_box = TokenBox(self.session, foil, description="foil")
        return [ipywidgets.HBox([self.answer_box, self.foil_box, self.run_button])]

    def export_section(self, selected_token: int = -1) -> str:
        if self.attribution is None:
            return ""
        return attribution_section(self.attribution, tuple(self.selected_head) or None, plotlyjs=False)

    @one_at_a_time
    def run(self) -> None:
        """Ask for the attribution of the prompt toward the boxes' answer and foil: one request."""
        self.set_status("busy", "attributing")
        answer, foil = self.answer_box.value, self.foil_box.value or None
        self._ask(lambda: self.session.attribute(self._prompt(), answer, foil, key=self.key), self._landed)

    def _landed(self, attribution: Attribution) -> None:
        self.attribution = attribution
        self._render()
        (top, effect), *_ = attribution.top_heads(1) or [((None, None), 0.0)]
        toward = "toward the answer" if effect > 0 else "against the answer"
        best = (
            f" · the head of largest effect (by size): layers[{top[0]}] head {top[1]}, {effect:+.3f} ({toward})"
            if top[0] is not None
            else ""
        )
        note = f" · {attribution.note}" if attribution.note else ""
        self.set_status("idle", f"{attribution.metric_label} = {attribution.metric:.4f}{best}{note}")

    def _selected(self) -> tuple[int, int] | None:
        return tuple(self.selected_head) if len(self.selected_head) == 2 else None

    def _render(self) -> None:
        if self._show(self.figure, attribution_figure(self.attribution, self._selected())):
            self.figure.data[0].on_click(self._on_click)

    def _outline(self) -> None:
        if self.attribution is not None:
            self._render()

    def _on_click(self, trace, points, state=None) -> None:
        head, layer = clicked(points, "x"), clicked(points, "y")
        if head is not None and layer is not None:
            self.selected_head = (layer, head)
