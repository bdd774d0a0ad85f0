"""AttentionView: one layer's attention pattern, one head large and all heads small.

State and rendering only: the view is given :class:`~nnterp_widgets.session.panels.PromptResult`
objects (``update``) and draws them with :mod:`.figures`; it never asks the engine for
anything. Only the chosen layer's pattern goes to the browser: the chosen head at full
resolution, and every head of that layer mean-pooled for the grid.

Traits for the explorer to link (plain traitlets, Python side): ``layer``, ``head``,
``selected_token`` (query position, ``-1`` for none) and ``status``
(``{"state": "idle" | "busy" | "error", "message": str}``). ``layer`` / ``head`` always
name what is shown: an out-of-range value is refused by the traits' validators (the
trait keeps its value, so nothing changes and the figure is left as it was) and the
message line says why.
"""

from __future__ import annotations

from functools import partial

import ipywidgets
import plotly.graph_objects as go
import traitlets

from ..session.panels import AttentionPanel, PromptResult
from .figures import attention_figure, head_grid_figure, selection_shapes
from .plot_panel import PlotPanel, clicked

__all__ = ["AttentionView"]


class AttentionView(PlotPanel):
    """A layer / head picker, the chosen head's heatmap and a grid of all heads."""

    layer = traitlets.Int(0)
    head = traitlets.Int(0)

    def __init__(self, result: PromptResult | None = None, layer: int = 0, head: int = 0, **kwargs):
        self._panel: AttentionPanel | None = None
        self.layer_input = ipywidgets.IntText(value=layer, description="layer", layout=ipywidgets.Layout(width="150px"))
        self.head_input = ipywidgets.IntText(value=head, description="head", layout=ipywidgets.Layout(width="150px"))
        self.range_label = ipywidgets.Label("")
        self.figure = go.FigureWidget()
        self.grid = go.FigureWidget()
        super().__init__(
            [ipywidgets.HBox([self.layer_input, self.head_input, self.range_label])],
            [self.figure, self.grid],
            **kwargs,
        )
        with self._hold():
            self.layer, self.head = layer, head
        self.layer_input.observe(partial(self._on_input, "layer"), "value")
        self.head_input.observe(partial(self._on_input, "head"), "value")
        self.observe(self._on_view_change, ["layer", "head"])
        if result is not None:
            self.update(result)

    # ------------------------------------------------------------------ public

    @property
    def panel(self) -> AttentionPanel | None:
        """The panel on screen (the chosen layer's), or None."""
        return self._panel

    @property
    def layers(self) -> list[int]:
        """The layers this prompt has a pattern for."""
        return sorted(self._result.patterns) if self._result is not None else []

    def update(self, result: PromptResult) -> None:
        """Show a new prompt, keeping layer / head / selection where still valid, else clamping."""
        notes = []
        layers = sorted(result.patterns)
        layer, head, selected = self.layer, self.head, self.selected_token
        count = len(result.tokens)
        self._result = result
        if selected >= count:
            notes.append(f"selected token {selected} is past this {count}-token prompt; selected {count - 1}")
            selected = count - 1
        if not layers:
            self._panel = None
            self._show(self.figure, go.Figure(layout=dict(title=dict(text="no attention pattern"))))
            self._show(self.grid, go.Figure())
            self.range_label.value = ""
            notes.insert(0, "this prompt has no attention pattern (the model family records none)")
        else:
            if layer not in result.patterns:
                new = min(layers, key=lambda known: (abs(known - layer), known))
                notes.append(f"layer {layer} is not in this prompt (layers {layers[0]}..{layers[-1]}); showing layers[{new}]")
                layer = new
            heads = int(result.patterns[layer].shape[0])
            if not 0 <= head < heads:
                new = min(max(head, 0), heads - 1)
                notes.append(f"head {head} is out of range (layers[{layer}] has heads 0..{heads - 1}); showing head {new}")
                head = new
        with self._hold():
            self.layer, self.head, self.selected_token = layer, head, selected
        self._sync_inputs()
        if layers:
            self._render(new_prompt=True)
        self.message.value = "; ".join(notes)

    # ------------------------------------------------------------------ checks

    def _refuse(self, problem: str, kept):
        if self._panel is not None:
            problem += f"; still showing layers[{self.layer}] head {self.head}"
        self.message.value = problem
        self._sync_inputs()
        return kept

    @traitlets.validate("layer")
    def _valid_layer(self, proposal):
        value = proposal["value"]
        if self._holding or self._result is None:
            return value  # no prompt yet: remembered, checked by the next update()
        layers = self.layers
        if value not in self._result.patterns:
            span = f"layers {layers[0]}..{layers[-1]}" if layers else "no attention pattern"
            return self._refuse(f"layer {value} is out of range: this prompt has {span}", self.layer)
        return value

    @traitlets.validate("head")
    def _valid_head(self, proposal):
        value = proposal["value"]
        if self._holding or self._panel is None:
            return value
        heads = self._panel.num_heads
        if not 0 <= value < heads:
            return self._refuse(f"head {value} is out of range: layers[{self.layer}] has heads 0..{heads - 1}", self.head)
        return value

    # ------------------------------------------------------------------ rendering

    def _sync_inputs(self) -> None:
        self.layer_input.value = self.layer
        self.head_input.value = self.head

    def _render(self, *, new_prompt: bool = False) -> None:
        assert self._result is not None
        layer = self.layer
        layer_changed = new_prompt or self._panel is None or self._panel.layer != layer
        if layer_changed:
            self._panel = self._result.attention(layer)
            if self.head >= self._panel.num_heads:  # layers with fewer heads
                with self._hold():
                    self.head = self._panel.num_heads - 1
                self._sync_inputs()
                self.message.value = f"layers[{layer}] has heads 0..{self._panel.num_heads - 1}; showing head {self.head}"
        panel = self._panel
        if self._show(self.figure, attention_figure(panel, self.head, self.selected_token)):
            self.figure.data[0].on_click(self._on_main_click)
        if layer_changed:
            self._show(self.grid, head_grid_figure(panel))
            for index, trace in enumerate(self.grid.data):  # each trace is one head
                trace.on_click(partial(self._on_grid_click, index))
        layers = self.layers
        self.range_label.value = f"layers {layers[0]}..{layers[-1]} · heads 0..{panel.num_heads - 1}"

    # ------------------------------------------------------------------ events

    def _on_input(self, name: str, change) -> None:
        setattr(self, name, change["new"])  # validated: a refused value puts the box back

    def _on_view_change(self, change) -> None:
        self._sync_inputs()
        if self._holding or self._result is None or not self._result.patterns:
            return
        self.message.value = ""
        self._render()

    def _on_selected(self, change) -> None:
        if self._holding or self._panel is None:
            return
        count = len(self._panel.tokens)
        self.figure.layout.shapes = selection_shapes(count, change["new"], row=True, column=True)

    def _on_main_click(self, trace, points, state=None) -> None:
        """Click on the head's heatmap: select that query token (the row)."""
        query = clicked(points, "y")
        if query is not None:
            self.selected_token = query

    def _on_grid_click(self, head: int, trace, points, state=None) -> None:
        """Click on the grid: show that head (each trace is one head)."""
        if getattr(points, "point_inds", None):
            self.head = head
