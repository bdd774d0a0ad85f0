"""`PatchPanel`: activation patching between two prompts, and their lens side by side.

State and rendering only. "run" asks the ``session`` for a sweep (`Session.patch`: the
clean run's ``site`` patched into the corrupted run, cell by cell, a `PatchResult`) and
for the pair's lens (`Session.compare`, a `PairLens`; asked again only when the prompts,
answer or foil change, not for a new site). The panel keeps both (``result``, ``pair``)
and draws them last, with `patch_figure` and `pair_figure`.

Bad input (prompts of different token counts, an answer or foil that is not one token, an
unknown site) is refused by the session before any engine request: the message is shown
in the status line and the next run is served as usual.

``selected_token`` (a position of the prompts, ``-1`` for none) is the explorer's linked
selection: a click on a position column selects it, and the selection outlines that
column in both maps. On a per-head sweep (``attention_head_outputs``) a click outlines
that head's column here only (``selected_head``): a head is no token.
"""

from __future__ import annotations


import ipywidgets
import traitlets

from ..requests.sites import SITES
from ..interventions.patching import PairLens, PatchResult
from .lifecycle import one_at_a_time
from ..session import gather
from .tool_view import ToolView
from ..figures.common import selection_shapes
from ..figures.html import patch_section
from ..figures.patching import PAIR_NAMES, pair_figure, patch_figure
from .plot_panel import FigureSlot, PlotPanel, clicked, row
from .token_box import TokenBox

__all__ = ["DEFAULT_PAIR", "PatchPanel"]

#: A factual-recall pair of one token count (9 on the trained model), (clean, corrupted, answer, foil).
DEFAULT_PAIR = ("The Eiffel Tower is in the city of", "The Colosseum is in the city of", " Paris", " Rome")


def _box(value: str, description: str, width: str) -> ipywidgets.Text:
    return ipywidgets.Text(value=value, description=description, layout=ipywidgets.Layout(width=width))


class PatchPanel(ToolView, PlotPanel):
    """``PatchPanel(session, clean=..., corrupted=..., answer=..., foil=..., site="layer_output")``.

    ``session``: anything with ``patch(clean, corrupted, answer, foil, site, key)`` and
    ``compare(clean, corrupted, answer, foil, key)`` returning futures (a `Session`);
    ``key`` names this panel's requests there (a newer run replaces a waiting one).
    """

    _asks_for = "patching sweep"

    #: The head outlined on a per-head map (``-1`` for none).
    selected_head = traitlets.Int(-1)

    figure = FigureSlot()  # the effect map
    pair_figure = FigureSlot()  # the pair's lens difference

    _default_key = "patch"
    _figure_slots = ("figure", "pair_figure")
    _layout = {"join": False}
    _run_label = "patch"
    _run_tooltip = "patch the clean run into the corrupted run, one cell at a time"
    #: It has prompts of its own: never of an earlier explorer prompt.
    shown_prompt = None

    _options = dict(zip(("clean", "corrupted", "answer", "foil"), DEFAULT_PAIR, strict=True), site=SITES[0])

    def _connect(self) -> None:
        # The maps join the page when the first sweep lands (side by side where the page
        # is wide enough): no bare axes before it, and no plotly view built inside a
        # hidden box, where its layout depends on timing.
        self.maps = row(align="flex-start")
        self.children = (*self.children, self.maps)
        self.observe(self._on_head, "selected_head")

    def _controls(self) -> list:
        clean, corrupted, answer, foil, site = self._defaults.values()
        self._sweep: PatchResult | None = None
        self.pair: PairLens | None = None
        self._pair_inputs: tuple | None = None  # what ``pair`` was asked for
        self.clean_box = _box(clean, "clean", "48%")
        self.corrupted_box = _box(corrupted, "corrupted", "48%")
        self.answer_box = TokenBox(self.session, answer, description="answer")
        self.foil_box = TokenBox(self.session, foil, description="foil")
        self.site_picker = ipywidgets.Dropdown(options=list(SITES), value=site, description="site")
        return [
            ipywidgets.HBox([self.clean_box, self.corrupted_box]),
            ipywidgets.HBox([self.answer_box, self.foil_box, self.site_picker, self.run_button]),
        ]

    def export_section(self, selected_token: int = -1) -> str:
        if self.result is None:  # the selection is a token: no column of a per-head map
            return ""
        return patch_section(self.result, self.pair, -1 if self.result.per_head else selected_token, plotlyjs=False)

    # ------------------------------------------------------------------ public

    @property
    def result(self) -> PatchResult | None:
        """The sweep on screen (a `PatchResult`), or None; ``pair`` is its `PairLens`."""
        return self._sweep

    @one_at_a_time
    def run(self) -> None:
        """Ask for the sweep of the boxes' prompts at the picked site (and the pair's lens
        when it is not the one shown); both drawn when both have landed."""
        clean, corrupted = self.clean_box.value, self.corrupted_box.value
        answer, foil, site = self.answer_box.value, self.foil_box.value, self.site_picker.value
        self.set_status("busy", f"patching {site}")
        inputs = (clean, corrupted, answer, foil)

        def both():  # the sweep's own error first: it checks what compare does
            futures = [self.session.patch(clean, corrupted, answer, foil, site=site, key=self.key)]
            if inputs != self._pair_inputs:
                futures.append(self.session.compare(clean, corrupted, answer, foil, key=f"{self.key}-compare"))
            return gather(futures)

        self._ask(both, lambda answers: self._landed(inputs, *answers), partial=self._so_far)

    def _so_far(self, result: PatchResult) -> None:
        """A partial sweep: the rows patched so far (the rest blank)."""
        self._sweep = result
        self._render()

    def _landed(self, inputs: tuple, result: PatchResult, pair: PairLens | None = None) -> None:
        self._sweep = result
        if pair is not None:
            self.pair, self._pair_inputs = pair, inputs
        self._render()
        layers, columns = result.patched.shape
        self.set_status(
            "idle",
            f"{result.site}: {layers} × {columns} cells in {result.requests} engine requests · "
            f"{result.metric_label()}: clean {result.clean_metric:.4f}, "
            f"corrupted {result.corrupted_metric:.4f}",
        )

    # ------------------------------------------------------------------ picture

    def _columns(self) -> tuple[int, int]:
        """The outlined column of the effect map and of the pair's map (-1: none)."""
        result = self.result
        if result.per_head:
            heads = result.patched.shape[1]
            return (self.selected_head if 0 <= self.selected_head < heads else -1), -1
        token = self.selected_token if 0 <= self.selected_token < len(result.clean) else -1
        return token, token

    def _render(self) -> None:
        effect, pair = self._columns()
        if self._show(self.figure, patch_figure(self.result, effect)):
            self.figure.data[0].on_click(self._on_click)
        if self.pair is not None and self._show(self.pair_figure, pair_figure(self.pair, pair, PAIR_NAMES)):
            self.pair_figure.data[0].on_click(self._on_click)
        if not self.maps.children:
            self.maps.children = (self.figure, self.pair_figure)

    def _outline(self) -> None:
        """A new selection: only the outlines change."""
        effect, pair = self._columns()
        layers, columns = self.result.patched.shape
        self.figure.layout.shapes = selection_shapes(columns, effect, row=False, column=True, rows=layers)
        if self.pair is not None:
            self.pair_figure.layout.shapes = selection_shapes(columns, pair, row=False, column=True, rows=layers)

    # ------------------------------------------------------------------ events

    def _on_click(self, trace, points, state=None) -> None:
        """A click on a cell: select its position everywhere, or outline its head here."""
        column = clicked(points, "x")
        if column is None or self.result is None:
            return
        if self.result.per_head and trace is self.figure.data[0]:
            self.selected_head = column
        else:
            self.selected_token = column

    def _on_selected(self, change) -> None:
        if self.result is not None:
            self._outline()

    def _on_head(self, change) -> None:
        if self.result is not None:
            self._outline()
