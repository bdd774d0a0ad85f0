"""`ContributionPanel`: through which tokens the answer was built (the contribution graph).

State and rendering only. "graph" asks the session for the prompt's `Contributions`
(`Session.contributions`, one engine request); the threshold slider keeps the routes
whose edges carry at least that share of a stream (`Contributions.graph`), redrawn from
the answer already held, with no new request. A click on a node selects its token
(``selected_token``, linked to the explorer's).
"""

from __future__ import annotations


import ipywidgets

from ..requests.contributions import Contributions
from ..requests.contributions import FLOOR, THRESHOLD
from ..figures.contributions import contribution_figure, route_picture
from ..figures.html import contributions_section
from .lifecycle import one_at_a_time
from .tool_view import ToolView
from .plot_panel import FigureSlot, PlotPanel

__all__ = ["ContributionPanel"]

#: The slider's top: above it hardly any attention edge is kept.
MAX_THRESHOLD = 0.5


class ContributionPanel(ToolView, PlotPanel):
    """``ContributionPanel(session, prompt, threshold=0.04)``; ``prompt``: the text, or a
    function returning it (the explorer passes its prompt box's)."""

    _shown_as = "contributions"
    _asks_for = "contribution graph"

    figure = FigureSlot()

    _default_key = "contributions"
    _run_label = "graph"
    _run_tooltip = "each token's share in every stream, every layer: one engine request"

    _options = {"threshold": THRESHOLD}

    def _connect(self) -> None:
        self.threshold.observe(one_at_a_time(lambda change: self._render()), "value")

    def _controls(self) -> list:
        self.threshold = ipywidgets.FloatSlider(
            value=self._defaults["threshold"],
            min=FLOOR,
            max=MAX_THRESHOLD,
            step=0.01,
            description="threshold",
            readout_format=".0%",
            continuous_update=False,
            tooltip="the smallest share of a stream an edge must carry to be drawn",
        )
        return [ipywidgets.HBox([self.run_button, self.threshold])]

    def export_section(self, selected_token: int = -1) -> str:
        if self.contributions is None:
            return ""
        return contributions_section(self.contributions, self.threshold.value, plotlyjs=False)

    @one_at_a_time
    def run(self) -> None:
        """Ask for the prompt's contribution shares: one request."""
        self.set_status("busy", "computing every block's shares")
        self._ask(lambda: self.session.contributions(self._prompt(), key=self.key), self._landed)

    def _landed(self, contributions: Contributions) -> None:
        self.contributions = contributions
        self._render()

    def _render(self) -> None:
        if self.contributions is None:
            return
        picture = self._picture = route_picture(self.contributions, self.threshold.value)
        if self._show(self.figure, contribution_figure(picture)):
            self.figure.data[-1].on_click(self._on_click)  # the nodes
        self.set_status(
            "idle",
            f"{picture.summary} on the routes to the last token "
            f"({len(self.contributions.shares)} attention shares returned from {self.contributions.floor:.0%} up)",
        )

    def _on_click(self, trace, points, state=None) -> None:
        inds = list(getattr(points, "point_inds", None) or [])
        picture = getattr(self, "_picture", None)
        if inds and picture is not None and 0 <= inds[0] < len(picture.nodes):
            self.selected_token = picture.nodes[inds[0]][4]  # a node's column is not its position
