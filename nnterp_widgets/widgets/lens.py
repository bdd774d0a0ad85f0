"""LogitLens: the logit-lens heatmap (layers × positions) of one prompt.

State and rendering only, like :class:`~nnterp_widgets.widgets.attention.AttentionView`:
``update(result)`` draws ``result.lens`` with :func:`.figures.lens_figure`. Traits for
the explorer to link: ``selected_token`` (position, ``-1`` for none; a click on a cell
selects its position) and ``status`` (``{"state": "idle" | "busy" | "error",
"message": str}``).
"""

from __future__ import annotations

import plotly.graph_objects as go

from ..session.panels import PromptResult
from .figures import lens_figure, selection_shapes
from .plot_panel import PlotPanel, clicked

__all__ = ["LogitLens"]


class LogitLens(PlotPanel):
    """The logit lens of the current prompt, with a message line and a status line."""

    def __init__(self, result: PromptResult | None = None, **kwargs):
        self.figure = go.FigureWidget()
        super().__init__([], [self.figure], **kwargs)
        if result is not None:
            self.update(result)

    def update(self, result: PromptResult) -> None:
        """Show a new prompt's lens; a selection past its end is clamped to the last token."""
        count = len(result.tokens)
        note = ""
        selected = self.selected_token
        if selected >= count:
            note = f"selected token {selected} is past this {count}-token prompt; selected {count - 1}"
            selected = count - 1
        self._result = result
        with self._hold():
            self.selected_token = selected
        if self._show(self.figure, lens_figure(result.lens, selected)):
            self.figure.data[0].on_click(self._on_click)
        self.message.value = note

    def _on_selected(self, change) -> None:
        if self._holding or self._result is None:
            return
        self.message.value = ""
        lens = self._result.lens
        self.figure.layout.shapes = selection_shapes(
            len(lens.tokens), change["new"], row=False, column=True, rows=lens.num_layers
        )

    def _on_click(self, trace, points, state=None) -> None:
        """Click on a cell: select its position (the column)."""
        position = clicked(points, "x")
        if position is not None:
            self.selected_token = position
