"""`SteerPanel`: steer the model with a vector made from two prompts, and read both continuations.

State and rendering only. "steer" asks the session for the vector (`Session.steering_vector`
of the positive and negative prompts at the layer, once per inputs) and then for the
steered and plain continuations of the explorer's prompt (`Session.steer`, one request);
both are shown aligned by step, the tokens that differ marked. A refused request (a layer
out of range, a coefficient that breaks the logits) shows the session's message; the next
one is served.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Callable

import ipywidgets

from ..session import Session
from ..requests.steering import SteerResult
from ..figures.causal import continuations_html
from .lifecycle import Asking, close_all, one_at_a_time

__all__ = ["SteerPanel"]

DEFAULT_POSITIVE = "I love this. It is wonderful and beautiful."
DEFAULT_NEGATIVE = "I hate this. It is awful and ugly."


def _relay(done: Future, to: Future) -> None:
    """``done``'s outcome onto ``to`` (a cancelled request reads as its error)."""
    if done.cancelled():
        to.cancel()
    elif done.exception() is not None:
        to.set_exception(done.exception())
    else:
        to.set_result(done.result())


class SteerPanel(Asking, ipywidgets.VBox):
    """``SteerPanel(session, prompt, layer=..., coefficient=4.0)``: ``prompt`` is the text
    to continue, or a function returning it (the explorer's prompt box)."""

    def __init__(
        self,
        session: Session,
        prompt: str | Callable[[], str],
        *,
        layer: int = 0,
        coefficient: float = 4.0,
        key: str = "steer",
        **kwargs: Any,
    ) -> None:
        self.session = session
        self.key = key
        self._prompt = prompt if callable(prompt) else (lambda: prompt)
        self.result: SteerResult | None = None
        self.vector = None
        self._vector_inputs: tuple | None = None
        self._init_asking()
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
        self.run_button = ipywidgets.Button(description="steer", tooltip="generate with and without the vector")
        self.message = ipywidgets.Label("")
        self.output = ipywidgets.HTML("")
        self.run_button.on_click(lambda button: self.run())
        super().__init__(
            [
                ipywidgets.HBox([self.positive_box, self.negative_box]),
                ipywidgets.HBox([self.layer_input, self.coefficient_slider, self.tokens_input, self.run_button]),
                self.message,
                self.output,
            ],
            **kwargs,
        )

    @property
    def shown_prompt(self) -> str | None:
        """The prompt of the answer shown (None before one)."""
        return None if self.result is None else self.result.steered.prompt

    @one_at_a_time
    def run(self) -> None:
        """Ask for the vector (when its prompts or layer changed), then both continuations."""
        self.output.value = ""  # no stale continuations under a new request
        self.message.value = "… steering"
        self._ask(self._steered, self._landed)

    def _steered(self) -> Future:
        """The vector (asked again only when its prompts or layer changed), then both
        continuations: one future for the two requests."""
        inputs = (self.positive_box.value, self.negative_box.value, self.layer_input.value)
        asks = (self._prompt(), self.layer_input.value, self.coefficient_slider.value, self.tokens_input.value)
        combined: Future = Future()

        def steer_with(vector) -> None:
            prompt, layer, coefficient, tokens = asks
            try:
                future = self.session.steer(prompt, vector, layer, coefficient, tokens, key=self.key)
            except Exception as error:  # noqa: BLE001 - e.g. Busy: shown in the panel
                combined.set_exception(error)
                return
            future.add_done_callback(lambda done: _relay(done, combined))

        def with_vector(done) -> None:
            if done.cancelled() or done.exception() is not None:
                _relay(done, combined)
                return
            self.vector, self._vector_inputs = done.result(), inputs
            steer_with(self.vector)

        if inputs != self._vector_inputs or self.vector is None:
            self.session.steering_vector(*inputs, key=f"{self.key}-vector").add_done_callback(with_vector)
        else:
            steer_with(self.vector)
        return combined

    def wait(self, timeout: float | None = 300) -> SteerResult | None:
        """Block until the newest request is shown (works in a notebook cell); re-raises its error."""
        self._wait_shown(timeout, "steered generation")
        return self.result

    def _landed(self, result) -> None:
        self.result = result
        self.output.value = continuations_html(result)
        where = "never" if result.divergence is None else f"from step {result.divergence}"
        self.message.value = (
            f"layers[{result.layer}] + {result.coefficient:g} × vector (norm {result.norm:.3g}): "
            f"the continuations differ {where}"
        )
        self._idle.set()

    def _failed(self, error: BaseException) -> None:
        self._error = error
        self.message.value = f"⚠ {type(error).__name__}: {error}"
        self._idle.set()

    def close(self) -> None:
        close_all(self.children)
        super().close()
