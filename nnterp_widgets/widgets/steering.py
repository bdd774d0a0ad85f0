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
from .integer_box import IntegerBox
from .lifecycle import MAIN, one_at_a_time
from .plot_panel import PlotPanel
from .tool_view import ToolView

__all__ = ["SteerPanel"]

#: The defaults teach: on the default model (SmolLM2-135M, 30 layers) this pair at
#: layers[8], times 2, turns "The Eiffel Tower is in the city of" toward " Rome" (the tour's
#: claim, tested in tests/test_trained_model.py).
DEFAULT_POSITIVE = "Rome is in Italy. Rome is in Italy."
DEFAULT_NEGATIVE = "Paris is in France. Paris is in France."
DEFAULT_COEFFICIENT = 2.0
#: The default layer's depth in the model: layers[8] of 30.
DEFAULT_DEPTH = 8 / 30
DEFAULTS_SAY = (
    "defaults: Rome minus Paris at about a quarter of the layers, ×2: on the default model this steers "
    "'The Eiffel Tower is in the city of' toward ' Rome'"
)


class SteerPanel(ToolView, PlotPanel):
    """``SteerPanel(session, prompt, layer=None, coefficient=2.0)``: ``prompt`` is the text
    to continue, or a function returning it (the explorer's prompt box); ``layer=None``
    takes about a quarter of the model's layers (layers[8] of the default model's 30),
    once the session knows them."""

    _asks_for = "steered generation"

    _default_key = "steer"
    _figure_slots = ()
    _run_label = "steer"
    _run_tooltip = "generate with and without the vector"

    _options = {"layer": None, "coefficient": DEFAULT_COEFFICIENT}

    def _connect(self) -> None:
        self.children = (*self.children, self.output)
        self.message.value = DEFAULTS_SAY
        self.session.on_described(self._know_layers)

    def _know_layers(self) -> None:
        """The layer box's range, and its default where the caller gave none (and nobody typed)."""
        layers = 1 + max((value.layer for value in self.session.describe() if value.layer is not None), default=0)
        untouched = self.layer_input.value == 0 and self.layer_input.text.value.strip() == "0"
        if self._defaults["layer"] is None and untouched:
            self.layer_input.value = min(layers - 1, round(layers * DEFAULT_DEPTH))
        self.layer_input.set_range(0, layers - 1)

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
        self.layer_input = IntegerBox(0 if layer is None else layer, minimum=0, description="layer")
        self.coefficient_slider = ipywidgets.FloatSlider(
            value=coefficient, min=-16.0, max=16.0, step=0.5, description="coefficient", continuous_update=False
        )
        self.tokens_input = IntegerBox(8, minimum=1, maximum=256, description="tokens")
        return [
            ipywidgets.HBox([self.positive_box, self.negative_box]),
            ipywidgets.HBox([self.layer_input, self.coefficient_slider, self.tokens_input, self.run_button]),
        ]

    def export_section(self, selected_token: int = -1) -> str:
        return "" if self.result is None else steering_section(self.result)

    @one_at_a_time
    def run(self) -> None:
        """Ask for the vector (when its prompts or layer changed), then both continuations."""
        refused = next((box.refusal for box in (self.layer_input, self.tokens_input) if not box.valid), "")
        if refused:
            self.message.value = f"⚠ {refused}"  # nothing asked: the box says what it takes
            return
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
