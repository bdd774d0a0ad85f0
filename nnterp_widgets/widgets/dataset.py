"""`DatasetView`: a batch's prompts as a table, with the metric over the set, linked to an
explorer.

    results = session.each(prompts).prompt(window=1).result()
    view = DatasetView(results, explorer=explorer)   # a click on a row opens it in the explorer
    view                                             # the table (sort, filter) and the curve

The table (``js/dataset_table.js``) lists every prompt with what it answered and the
batch's metric; it sorts by a column, filters by text, and draws only the rows in view.
Under it, the metric over the set: the lens's agreement with the model per layer (a
prompt or lens batch), the mean direct effect per layer (attribution), else a histogram.
"""

from __future__ import annotations

from typing import Any

import anywidget
import ipywidgets
import traitlets

from ..figures.dataset import DatasetTable, dataset_figure, dataset_table
from ..figures.html import dataset_section
from ..requests import Results
from .assets import DATASET_TABLE_CSS, DATASET_TABLE_ESM, module_text
from .plot_panel import FigureSlot, apply_theme, show_figure

__all__ = ["DatasetTableWidget", "DatasetView"]


class DatasetTableWidget(anywidget.AnyWidget):
    """The table itself (its trait contract: the comment atop ``js/dataset_table.js``)."""

    _esm = module_text(DATASET_TABLE_ESM)  # with the theme watcher it imports inlined
    _css = DATASET_TABLE_CSS
    rows = traitlets.List([]).tag(sync=True)
    metric = traitlets.Unicode("").tag(sync=True)
    caption = traitlets.Unicode("").tag(sync=True)
    selected = traitlets.Int(-1).tag(sync=True)
    #: The page's theme as the front end sees it ("light" / "dark"); JS writes it.
    theme = traitlets.Unicode("light").tag(sync=True)


class DatasetView(ipywidgets.VBox):
    """A batch's `Results` as a table and a figure; a selected row opens its prompt in
    ``explorer`` (an `Explorer`, optional).

    Args:
        results: what ``session.each(prompts).<question>(...)`` gave (a prompt, lens,
            attribute, generate or steer batch).
        explorer: the explorer whose prompt a click on a row sets, or None.
        tokenizer: decodes the model's answers (the explorer's session's by default).
    """

    figure = FigureSlot()

    def __init__(self, results: Results, *, explorer: Any = None, tokenizer: Any = None, **kwargs: Any) -> None:
        self.explorer = explorer
        if tokenizer is None and explorer is not None:
            tokenizer = explorer.session.tokenizer()
        self.table: DatasetTable = dataset_table(results, tokenizer)
        self.results = results
        self.grid = DatasetTableWidget(
            rows=[list(row) for row in self.table.rows()],
            metric=self.table.metric,
            caption=f"{results.kind} over {len(results)} prompts, {len(results.answered)} answered"
            + (f", {len(results.errors)} failed" if results.errors else ""),
        )
        self.grid.observe(self._on_selected, "selected")
        show_figure(self.figure, dataset_figure(self.table))
        # the figure follows the page's theme, which the table reports
        self.grid.observe(lambda change: apply_theme(self.figure, change["new"]), "theme")
        super().__init__([self.grid, self.figure], **kwargs)
        if explorer is not None:
            explorer.add_section(self)

    @property
    def selected(self) -> int:
        """The selected prompt's index (-1: none)."""
        return self.grid.selected

    @selected.setter
    def selected(self, index: int) -> None:
        self.grid.selected = int(index)

    def _on_selected(self, change) -> None:
        index = change["new"]
        if self.explorer is None or not 0 <= index < len(self.table.prompts):
            return
        prompt = self.results.prompts[index]
        self.explorer.prompt_box.value = prompt if isinstance(prompt, str) else self.table.prompts[index]

    def export_section(self, selected_token: int = -1) -> str:
        """The table and the figure, for the HTML export."""
        return dataset_section(self.table, self.selected)

    def to_html(self, path: str | None = None) -> str:
        """The table and the figure as a self-contained page; written to ``path`` if given."""
        from ..figures.html import page

        title = f"{self.results.kind} over {len(self.results)} prompts"
        return page(
            "nnterp-widgets dataset", title, [], [dataset_section(self.table, self.selected, plotlyjs=True)], path
        )
