"""LogitLens: the logit-lens heatmap (layers × positions) of one prompt.

State and rendering only, like :class:`~nnterp_widgets.widgets.attention.AttentionView`:
``update(result)`` draws ``result.lens`` with :func:`.figures.lens_figure`. Traits for
the explorer to link: ``selected_token`` (position, ``-1`` for none; a click on a cell
selects its position) and ``status`` (``{"state": "idle" | "busy" | "error",
"message": str}``).
"""

from __future__ import annotations

import ipywidgets
import plotly.graph_objects as go
import traitlets

from ..session.panels import PromptResult
from .attention import STATES, _clicked, show_figure, status_text
from .figures import lens_figure, selection_shapes

__all__ = ["LogitLens"]


class LogitLens(ipywidgets.VBox):
    """The logit lens of the current prompt, with a message line and a status line."""

    selected_token = traitlets.Int(-1)
    status = traitlets.Dict({"state": "idle", "message": ""})

    def __init__(self, result: PromptResult | None = None, **kwargs):
        self._result: PromptResult | None = None
        self._holding = False
        self.message = ipywidgets.Label("")
        self.status_label = ipywidgets.Label("")
        self.figure = go.FigureWidget()
        super().__init__(children=[self.message, self.status_label, self.figure], **kwargs)
        self.observe(self._on_selected, "selected_token")
        self.observe(self._on_status, "status")
        if result is not None:
            self.update(result)

    @property
    def result(self) -> PromptResult | None:
        return self._result

    def set_status(self, state: str, message: str = "") -> None:
        """Show the session's state: ``"busy"`` (a request is running), ``"error"`` or ``"idle"``."""
        if state not in STATES:
            raise ValueError(f"status state must be one of {STATES}, got {state!r}")
        self.status = {"state": state, "message": message}

    def update(self, result: PromptResult) -> None:
        """Show a new prompt's lens; a selection past its end is clamped to the last token."""
        count = len(result.tokens)
        note = ""
        selected = self.selected_token
        if selected >= count:
            note = f"selected token {selected} is past this {count}-token prompt; selected {count - 1}"
            selected = count - 1
        self._result = result
        self._holding = True
        try:
            self.selected_token = selected
        finally:
            self._holding = False
        if show_figure(self.figure, lens_figure(result.lens, selected)):
            self.figure.data[0].on_click(self._on_click)
        self.message.value = note

    @traitlets.validate("selected_token")
    def _valid_selected(self, proposal):
        value = proposal["value"]
        if self._holding or self._result is None:
            return value
        count = len(self._result.tokens)
        if not -1 <= value < count:
            self.message.value = f"token {value} is out of range: positions 0..{count - 1}, or -1 for none"
            return self.selected_token
        return value

    def _on_selected(self, change) -> None:
        if self._holding or self._result is None:
            return
        self.message.value = ""
        lens = self._result.lens
        self.figure.layout.shapes = selection_shapes(
            len(lens.tokens), change["new"], row=False, column=True, rows=lens.num_layers
        )

    def _on_status(self, change) -> None:
        self.status_label.value = status_text(change["new"])

    def _on_click(self, trace, points, state=None) -> None:
        """Click on a cell: select its position (the column)."""
        position = _clicked(points, "x")
        if position is not None:
            self.selected_token = position
