"""AttentionView: one layer's attention pattern, one head large and all heads small.

State and rendering: the view shows the :class:`~nnterp_widgets.session.panels.AttentionPattern`
a prompt's result came with (``update``), and a layer switch asks its ``session`` for
that layer's panel (one engine request, cached by the session); a head switch, a click
or a hover asks nothing. The chosen head is drawn as the panel ships it (decoded from
one byte a cell: every cell on a short prompt, block maxima on a long one), the grid
from the panel's per-head thumbnails. On a pooled pattern a click on a cell zooms: the
session is asked for the exact cells of a window around it (one request, cached), and
``zoom out`` returns to the whole pattern.

Traits for the explorer to link (plain traitlets, Python side): ``layer``, ``head``,
``selected_token`` (query position, ``-1`` for none), ``ablated`` (the ``(layer, head)`` pairs toggled for
ablation: with ``ablate mode`` on, a click on the grid toggles that head of the shown
layer instead of showing it; the explorer re-runs the prompt with them) and ``status``
(``{"state": "idle" | "busy" | "error", "message": str}``). ``layer`` / ``head`` always
name what is asked for: an out-of-range value is refused by the traits' validators (the
trait keeps its value, so nothing changes and the figure is left as it was) and the
message line says why.
"""

from __future__ import annotations

from functools import partial

import ipywidgets
import plotly.graph_objects as go
import traitlets

from ..requests.attention import PATTERN_SIDE, AttentionPattern
from ..requests.prompt import PromptResult
from .attention_text import AttentionText, text_view_state
from ..figures.attention import GRID_WIDTH, attention_figure, attention_selection, head_grid_figure
from .integer_box import parse_integer
from .lifecycle import MAIN, Asking, one_at_a_time
from .plot_panel import FigureSlot, PlotPanel, clicked, row
from ..session import Session, session_of

#: The attention view's second line of requests: the token view's row of the selected query.
ROW = "row"

__all__ = ["AttentionView", "DECODE_STEP_PATTERN", "PREFILL_PATTERN", "ZOOM_SIDE"]

#: Which step the pattern is of: always the prompt's prefill (the engine serves it there only).
PREFILL_PATTERN = "the pattern of the prefill (step 0)"
#: ... said while a generation's decode step is shown elsewhere (the tree greys the pattern with the reason).
DECODE_STEP_PATTERN = PREFILL_PATTERN + ", not of step {step}: a decode step has none (the module tree says why)"


#: A zoom's side in tokens: a click on a pooled cell shows this many exact queries and keys
#: around it, about 4 px a cell in the heatmap (the whole pattern side, 512, would be under
#: 1 px a cell there, no closer than the pooled view).
ZOOM_SIDE = 64


class AttentionView(Asking, PlotPanel):
    """A layer / head picker, the chosen head's heatmap and a grid of all heads.

    ``session``: where a layer switch asks for the layer's pattern and a zoom for a
    window of it (anything with ``attention(text, layer, key, ablate=..., window=..., side=...) ->
    Future``, a `Session`); ``key`` names this view's requests there.
    """

    _shown_as = "_panel"
    _asks_for = "pattern"

    layer = traitlets.Int(0)
    head = traitlets.Int(0)
    ablated = traitlets.Tuple()

    _clears_stale = False  # a main view: the explorer undims it with the prompt's answer
    figure = FigureSlot()  # the shown head's pattern
    grid = FigureSlot(tools=False)  # every head of the layer: a picker, nothing to zoom

    def __init__(
        self,
        result: PromptResult | None = None,
        layer: int = 0,
        head: int = 0,
        *,
        session: Session | None = None,
        key: str = "attention",
        **kwargs,
    ):
        self._panel: AttentionPattern | None = None
        #: The zoom window on screen (exact cells of part of ``_panel``'s layer), or None.
        self._zoomed: AttentionPattern | None = None
        self._notes: list = []
        self.session = session if session is None else session_of(session)
        self.key = key
        self._init_asking()  # answers are shown from the kernel's thread
        # Text boxes parsed here: a number box in the browser turns "1.5" into 15 unasked.
        box = dict(
            continuous_update=False, layout=ipywidgets.Layout(width="120px"), style=dict(description_width="40px")
        )
        self.layer_input = ipywidgets.Text(value=str(layer), description="layer", **box)
        self.head_input = ipywidgets.Text(value=str(head), description="head", **box)
        self.range_label = ipywidgets.Label("")
        self.ablate_mode = ipywidgets.ToggleButton(
            value=False, description="ablate mode", tooltip="on: a click on the head grid toggles that head's ablation"
        )
        self.clear_ablation = ipywidgets.Button(description="clear ablation", tooltip="ablate no head")
        self.ablated_label = ipywidgets.Label("")
        # Shown only while a decode step is shown elsewhere: its room is the token view's.
        self.step_note = ipywidgets.Label(PREFILL_PATTERN, layout=ipywidgets.Layout(display="none"))
        self.clear_ablation.on_click(lambda button: setattr(self, "ablated", ()))
        self.zoom_out_button = ipywidgets.Button(
            description="zoom out", disabled=True, tooltip="back to the whole pattern (click a pooled cell to zoom)"
        )
        self.zoom_out_button.on_click(lambda button: self.zoom_out())
        for button in (self.zoom_out_button, self.ablate_mode, self.clear_ablation):
            button.layout.width = "auto"  # as wide as its words: the row fits beside the tree
        #: The prompt as text, shaded in the browser by the hovered (or selected) token's
        #: weights (`attention_text`); a click there selects a token. Under the head grid,
        #: beside the heatmap.
        self.text_view = AttentionText(layout=ipywidgets.Layout(width=f"{GRID_WIDTH}px"))
        self._grid_column: ipywidgets.VBox | None = None
        #: Past the pattern side: the selected query's exact row (`Session.attention_row`),
        #: ``(result, layer, query, panel)`` once landed; the newest request's future.
        self._query_row: tuple | None = None
        self._query_row_asked: tuple = (None, None, None)
        super().__init__(
            [
                row(
                    [
                        self.layer_input,
                        self.head_input,
                        self.zoom_out_button,
                        self.ablate_mode,
                        self.clear_ablation,
                        self.range_label,
                        self.ablated_label,
                    ],
                ),
                self.step_note,
            ],
            ("figure", "grid"),
            beside=True,
            **kwargs,
        )
        with self._hold():
            self.layer, self.head = layer, head
        self.layer_input.observe(one_at_a_time(partial(self._on_input, "layer")), "value")
        self.head_input.observe(one_at_a_time(partial(self._on_input, "head")), "value")
        self.observe(self._on_view_change, ["layer", "head"])
        self.observe(self._on_ablated, "ablated")
        self.text_view.observe(one_at_a_time(self._on_text_click), "selected")
        if result is not None:
            self.update(result)

    # ------------------------------------------------------------------ public

    @property
    def panel(self) -> AttentionPattern | None:
        """The chosen layer's panel (the whole pattern, as shipped), or None."""
        return self._panel

    @property
    def zoomed(self) -> AttentionPattern | None:
        """The zoom window on screen (exact cells), or None when the whole pattern is."""
        return self._zoomed

    @property
    def shown(self) -> AttentionPattern | None:
        """What the heatmap draws: the zoom window, else the layer's panel."""
        return self._zoomed if self._zoomed is not None else self._panel

    @one_at_a_time
    def zoom(self, query_start: int, key_start: int) -> None:
        """Show the exact cells of the window from ``(query_start, key_start)``, `ZOOM_SIDE`
        tokens a side (at most the session's pattern side): one request (cached by the session)."""
        result, layer = self._result, self.layer
        if result is None or self._panel is None:
            self.message.value = "no pattern to zoom into yet"
            return
        if self.session is None:
            self.message.value = "a zoom needs a session to ask the engine for exact cells"
            return
        origin = (int(query_start), int(key_start))
        self.set_status("busy", f"asking for layers[{layer}] queries {origin[0]}.., keys {origin[1]}..")
        side = self._zoom_side()
        self._ask(
            lambda: self.session.attention(
                result.prompt, layer, key=self.key, ablate=result.ablate, window=origin, side=side
            ),
            lambda window: self._zoom_landed(result, layer, window),
        )

    @one_at_a_time
    def zoom_out(self) -> None:
        """Back to the layer's whole pattern (no request)."""
        if self._zoomed is None:
            return
        self._zoomed = None
        self._render()

    def _zoom_side(self) -> int:
        """A zoom window's side: `ZOOM_SIDE`, or the session's pattern side if smaller."""
        return min(ZOOM_SIDE, getattr(self.session, "pattern_side", PATTERN_SIDE))

    def _zoom_landed(self, result: PromptResult, layer: int, window: AttentionPattern) -> None:
        if result is not self._result or layer != self.layer or self._panel is None:
            return  # a newer prompt or layer is on its way
        self._zoomed = window
        self._render()
        self.set_status("idle", "")

    @property
    def layers(self) -> list[int]:
        """The layers this prompt has a pattern for."""
        return list(self._result.pattern_layers) if self._result is not None else []

    def toggle_ablation(self, head: int, layer: int | None = None) -> None:
        """Add ``(layer, head)`` (the shown layer by default) to ``ablated``, or remove it."""
        pair = (self.layer if layer is None else int(layer), int(head))
        heads = set(self.ablated)
        heads.symmetric_difference_update({pair})
        self.ablated = tuple(sorted(heads))

    @one_at_a_time
    def show_step(self, step: int, reason: str | None = None) -> None:
        """Say which step the pattern is of while generation step ``step`` is shown
        elsewhere; ``reason``: the engine's, when that step serves no pattern (a decode step)."""
        self.step_note.value = PREFILL_PATTERN if reason is None else DECODE_STEP_PATTERN.format(step=step)
        self.step_note.layout.display = "none" if reason is None else None

    def update(self, result: PromptResult) -> None:
        """Show a new prompt, keeping layer / head / selection where still valid, else clamping."""
        notes = []
        layers = list(result.pattern_layers)
        layer, selected = self.layer, self.selected_token
        count = len(result.tokens)
        self._result = result
        self._panel = self._zoomed = None
        if selected >= count:
            notes.append(f"selected token {selected} is past this {count}-token prompt; selected {count - 1}")
            selected = count - 1
        if not layers:
            self._show(self.figure, go.Figure(layout=dict(title=dict(text="no attention pattern"))))
            self._show(self.grid, go.Figure())
            self.range_label.value = ""
            notes.insert(0, "this prompt has no attention pattern (the model family records none)")
        elif self.session is None and result.attention is not None and result.attention.layer != layer:
            # Nothing to ask a layer of: show the one the result came with.
            if layer not in layers:
                notes.append(
                    f"layer {layer} is not in this prompt (layers {layers[0]}..{layers[-1]}); "
                    f"showing layers[{result.attention.layer}]"
                )
            layer = result.attention.layer
        elif layer not in layers:
            new = min(layers, key=lambda known: (abs(known - layer), known))
            notes.append(
                f"layer {layer} is not in this prompt (layers {layers[0]}..{layers[-1]}); showing layers[{new}]"
            )
            layer = new
        with self._hold():
            self.layer, self.selected_token = layer, selected
        self._sync_inputs()
        self.message.value = "; ".join(notes)
        if layers:
            self._want(layer, notes)

    def close(self) -> None:
        self.text_view.close()  # not on the page until the grid joins it
        super().close()

    # ------------------------------------------------------------------ checks

    def _refuse(self, problem: str, kept):
        if self._panel is not None:
            problem += f"; still showing layers[{self._panel.layer}] head {self.head}"
        self.message.value = problem
        self._sync_inputs()
        return kept

    @traitlets.validate("layer")
    def _valid_layer(self, proposal):
        value = proposal["value"]
        if self._holding or self._result is None:
            return value  # no prompt yet: remembered, checked by the next update()
        layers = self.layers
        if value not in layers:
            span = f"layers {layers[0]}..{layers[-1]}" if layers else "no attention pattern"
            return self._refuse(f"layer {value} is out of range: this prompt has {span}", self.layer)
        shown = self._result.attention
        if self.session is None and (shown is None or shown.layer != value):
            return self._refuse(f"layer {value} needs a session to ask the engine for it", self.layer)
        return value

    @traitlets.validate("head")
    def _valid_head(self, proposal):
        value = proposal["value"]
        if self._holding or self._panel is None:
            return value
        heads = self._panel.num_heads
        if not 0 <= value < heads:
            return self._refuse(
                f"head {value} is out of range: layers[{self._panel.layer}] has heads 0..{heads - 1}", self.head
            )
        return value

    # ------------------------------------------------------------------ the layer's panel

    def _want(self, layer: int, notes: list | None = None) -> None:
        """Show ``layer``: from the prompt's result, else one session request."""
        result = self._result
        self._notes = list(notes or [])  # shown with the panel, when it lands
        if result.attention is not None and result.attention.layer == layer:
            self._ask_nothing()  # shown from the prompt's answer: an older layer on its way is not
            self._show_panel(result, layer, result.attention)
            return
        self.set_status("busy", f"asking for layers[{layer}]")
        self._ask(
            lambda: self.session.attention(result.prompt, layer, key=self.key, ablate=result.ablate),
            lambda panel: self._layer_landed(result, layer, panel),
        )

    def _layer_landed(self, result: PromptResult, layer: int, panel: AttentionPattern) -> None:
        if result is not self._result or layer != self.layer:
            return  # a newer prompt or layer is on its way
        self._show_panel(result, layer, panel)
        self.set_status("idle", "")

    def _show_panel(self, result: PromptResult, layer: int, panel: AttentionPattern) -> None:
        notes, self._notes = self._notes, []
        self._panel, self._zoomed = panel, None
        if not 0 <= self.head < panel.num_heads:
            new = min(max(self.head, 0), panel.num_heads - 1)
            notes.append(
                f"head {self.head} is out of range (layers[{layer}] has heads 0..{panel.num_heads - 1}); showing head {new}"
            )
            with self._hold():
                self.head = new
            self._sync_inputs()
        self._render(new_panel=True)
        if notes:
            self.message.value = "; ".join(notes)

    # ------------------------------------------------------------------ rendering

    def _beside(self, joined: list) -> tuple:
        """The heatmap, then the head grid with the token view under it."""
        grid = type(self).grid.made(self)
        if grid is None or grid not in joined:
            return tuple(joined)
        if self._grid_column is None:
            self._grid_column = ipywidgets.VBox([grid, self.text_view])
        return tuple(self._grid_column if widget is grid else widget for widget in joined)

    def _sync_inputs(self) -> None:
        self.layer_input.value = str(self.layer)
        self.head_input.value = str(self.head)

    def _render(self, *, new_panel: bool = False) -> None:
        panel = self._panel
        if panel is None:
            return
        if self._show(self.figure, attention_figure(self.shown, self.head, self.selected_token)):
            self.figure.data[0].on_click(self._on_main_click)
        self.zoom_out_button.disabled = self._zoomed is None
        ablated = [head for layer, head in self.ablated if layer == panel.layer]
        if self._show(self.grid, head_grid_figure(panel, shown=self.head, ablated=ablated)) or new_panel:
            for index, trace in enumerate(self.grid.data):  # each trace is one head
                trace.on_click(partial(self._on_grid_click, index))
        layers = self.layers
        self.range_label.value = f"layers {layers[0]}..{layers[-1]} · heads 0..{panel.num_heads - 1}"
        self._render_text()

    @property
    def row_panel(self) -> AttentionPattern | None:
        """The selected query's exact row over every key, where the token view needed one
        (the prompt past the pattern side, or a zoom), or None."""
        return self._query_row[3] if self._row_is_current() else None

    def wait_token_view(self, timeout: float | None = 300) -> AttentionPattern | None:
        """Block until the token view shows the selected query's row (past the pattern
        side; at once otherwise), in a notebook cell too; returns `row_panel`."""
        self.wait(timeout, line=ROW)
        return self.row_panel

    def _row_is_current(self, asked: tuple | None = None) -> bool:
        result, layer, query = asked if asked is not None else (self._query_row or (None, None, None))[:3]
        return result is not None and result is self._result and layer == self.layer and query == self.selected_token

    def _render_text(self) -> None:
        shown = self.shown
        if shown is None:
            return
        whole = shown.exact and shown.whole
        if not whole and self.selected_token >= 0 and not self._row_is_current():
            self._want_row()
        self.text_view.show(text_view_state(shown, self.head, None if whole else self.row_panel))
        self.text_view.selected = self.selected_token

    def _want_row(self) -> None:
        """Ask for the selected query's exact row (one request, cached by the session),
        shown by the token view if the selection is still that query when it lands."""
        if self.session is None or not hasattr(self.session, "attention_row"):
            return
        result, layer, query = self._result, self.layer, self.selected_token
        asked = self._query_row_asked
        if not self._line(ROW).idle.is_set() and asked[0] is result and asked[1:] == (layer, query):
            return  # already on its way (a head switch meanwhile redraws, and asks nothing)
        self._query_row_asked = (result, layer, query)
        self._ask(
            lambda: self.session.attention_row(result.prompt, layer, query, key=self.key, ablate=result.ablate),
            lambda row: self._row_landed(result, layer, query, row),
            ROW,
        )

    def _row_landed(self, result, layer: int, query: int, row: AttentionPattern) -> None:
        if self._row_is_current((result, layer, query)):
            self._query_row = (result, layer, query, row)
            self._render_text()

    def _show_error(self, error: BaseException, line: str = MAIN) -> None:
        if line == ROW:
            self.message.value = f"the token view's row: {type(error).__name__}: {error}"
        else:
            super()._show_error(error, line)

    # ------------------------------------------------------------------ events

    def _on_input(self, name: str, change) -> None:
        text = str(change["new"]).strip()
        if text == str(getattr(self, name)):
            return
        try:
            number = parse_integer(text, name)
        except ValueError as error:
            self.message.value = str(error)
            self._sync_inputs()
            return
        setattr(self, name, number)  # validated: a refused value puts the box back

    def _on_view_change(self, change) -> None:
        self._sync_inputs()
        if self._holding or self._result is None or not self._result.pattern_layers:
            return
        self.message.value = ""
        if change["name"] == "layer":
            self._zoomed = None
            self._want(self.layer)
        else:
            self._render()

    def _on_selected(self, change) -> None:
        if self._holding or self._panel is None:
            return
        self.figure.layout.shapes = attention_selection(self.shown, change["new"])
        shown = self.shown
        if shown.exact and shown.whole:
            self.text_view.selected = change["new"]
        else:
            self._render_text()  # the new query's row: one request

    def _on_main_click(self, trace, points, state=None) -> None:
        """Click on the head's heatmap: on exact cells select that query token (the row);
        on a pooled cell zoom into the window of exact cells around it."""
        row, col = clicked(points, "y"), clicked(points, "x")
        shown = self.shown
        if row is None or shown is None:
            return
        if shown.exact:
            self.selected_token = row
        elif col is not None:
            self.zoom(*shown.zoom_origin(row, col, self._zoom_side()))

    def _on_text_click(self, change) -> None:
        """A click on a token in the token view selects it (the explorer's selected token)."""
        if change["new"] != self.selected_token:
            self.selected_token = change["new"]
            self.text_view.selected = self.selected_token  # put back where it was refused

    def _on_grid_click(self, head: int, trace, points, state=None) -> None:
        """Click on the grid: show that head (each trace is one head), or in ablate mode
        toggle its ablation."""
        if not getattr(points, "point_inds", None):
            return
        if self.ablate_mode.value:
            self.toggle_ablation(head)
        else:
            self.head = head

    def _on_ablated(self, change) -> None:
        heads = change["new"]
        self._render()  # the grid marks the ablated heads
        self.ablated_label.value = (
            ("ablated: " + ", ".join(f"L{layer}H{head}" for layer, head in heads)) if heads else ""
        )
