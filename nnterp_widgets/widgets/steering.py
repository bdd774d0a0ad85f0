"""`SteerPanel`: steer the model with a vector made from two prompts, and read both continuations.

State and rendering only. "steer" asks the session for the vector (`Session.steering_vector`
of the positive and negative prompts at the layer, once per inputs) and then for the
steered and plain continuations of the explorer's prompt (`Session.steer`, one request);
both are shown aligned by step, the tokens that differ marked. A refused request (a layer
out of range, a coefficient that breaks the logits) shows the session's message; the next
one is served.
"""

from __future__ import annotations


import ipywidgets

from ..interventions import SteerResult
from ..session import Job, resolved
from ..figures.causal import continuations_html
from ..figures.html import steering_section
from .lifecycle import MAIN, one_at_a_time
from .plot_panel import PlotPanel
from .tool_view import ToolView

__all__ = ["SteerPanel"]

DEFAULT_POSITIVE = "I love this. It is wonderful and beautiful."
DEFAULT_NEGATIVE = "I hate this. It is awful and ugly."


class SteerPanel(ToolView, PlotPanel):
    """``SteerPanel(session, prompt, layer=..., coefficient=4.0)``: ``prompt`` is the text
    to continue, or a function returning it (the explorer's prompt box)."""

    _asks_for = "steered generation"

    _default_key = "steer"
    _figure_slots = ()
    _run_label = "steer"
    _run_tooltip = "generate with and without the vector"

    _options = {"layer": 0, "coefficient": 4.0}

    def _connect(self) -> None:
        self.children = (*self.children, self.output)

    @property
    def result(self) -> SteerResult | None:
        """The continuations on screen (a `SteerResult`), or None."""
        return self._steered_result

    def _controls(self) -> list:
        layer, coefficient = self._defaults["layer"], self._defaults["coefficient"]
        self._steered_result: SteerResult | None = None
        self.vector = None
        self._vector_inputs: tuple | None = None
        self.output = ipywidgets.HTML("")
        self.positive_box = ipywidgets.Text(
            DEFAULT_POSITIVE, description="positive", layout=ipywidgets.Layout(width="48%")
        )
        self.negative_box = ipywidgets.Text(
            DEFAULT_NEGATIVE, description="negative", layout=ipywidgets.Layout(width="48%")
        )
        self.layer_input = ipywidgets.BoundedIntText(
            value=layer,
            min=0,
            max=10_000,
            description="layer",
            style={"description_width": "initial"},  # the box holds its five digits
            layout=ipywidgets.Layout(width="150px"),
        )
        self.coefficient_slider = ipywidgets.FloatSlider(
            value=coefficient, min=-16.0, max=16.0, step=0.5, description="coefficient", continuous_update=False
        )
        self.tokens_input = ipywidgets.BoundedIntText(
            value=8,
            min=1,
            max=256,
            description="tokens",
            style={"description_width": "initial"},
            layout=ipywidgets.Layout(width="150px"),
        )
        return [
            ipywidgets.HBox([self.positive_box, self.negative_box]),
            ipywidgets.HBox([self.layer_input, self.coefficient_slider, self.tokens_input, self.run_button]),
        ]

    def export_section(self, selected_token: int = -1) -> str:
        return "" if self.result is None else steering_section(self.result)

    @one_at_a_time
    def run(self) -> None:
        """Ask for the vector (when its prompts or layer changed), then both continuations."""
        self.output.value = ""  # no stale continuations under a new request
        self.message.value = "… steering"
        self._ask(self._steered, self._landed, partial=self._landed)

    def _steered(self) -> Job:
        """The vector (asked again only when its prompts or layer changed), then both
        continuations: one job for the two requests."""
        inputs = (self.positive_box.value, self.negative_box.value, self.layer_input.value)
        prompt, layer, coefficient, tokens = (
            self._prompt(),
            self.layer_input.value,
            self.coefficient_slider.value,
            self.tokens_input.value,
        )
        if inputs == self._vector_inputs and self.vector is not None:
            vector = resolved(self.vector, "steering vector")
        else:
            vector = self.session.steering_vector(*inputs, key=f"{self.key}-vector")

        def steer_with(found) -> Job:
            self.vector, self._vector_inputs = found, inputs
            return self.session.steer(prompt, found, layer, coefficient, tokens, key=self.key)

        return vector.then(steer_with)

    def _landed(self, result: SteerResult) -> None:
        self._steered_result = result
        self.output.value = continuations_html(result)
        where = "never" if result.divergence is None else f"from step {result.divergence}"
        self.message.value = (
            f"layers[{result.layer}] + {result.coefficient:g} × vector (norm {result.norm:.3g}): "
            f"the continuations differ {where}"
        )

    def _show_error(self, error: BaseException, line: str = MAIN) -> None:
        self.message.value = f"⚠ {type(error).__name__}: {error}"
