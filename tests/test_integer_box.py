"""The one box a view takes a whole number in (issue 36): "1.5", "-1", "", "abc" are
refused in place with the range taken, never rounded or clamped, and the view asks
nothing while a box refuses; the steering tab's defaults follow the model's depth."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from nnterp_widgets.session import Job
from nnterp_widgets.widgets.generation import GenerationView
from nnterp_widgets.widgets.integer_box import IntegerBox, parse_integer
from nnterp_widgets.widgets.steering import SteerPanel

BAD = ["1.5", "-1", "", "abc", "1e3", "0"]


@pytest.mark.parametrize("typed", BAD)
def test_a_box_refuses_what_is_not_a_whole_number_in_its_range_and_keeps_its_value(typed):
    box = IntegerBox(8, minimum=1, maximum=256, description="tokens")
    box.text.value = typed
    assert not box.valid and box.value == 8 and box.text.value == typed  # kept as typed, refused in place
    assert "from 1 to 256" in box.refusal and "from 1 to 256" in box.note.value
    box.text.value = " 12 "
    assert box.valid and box.value == 12 and box.note.value == ""
    box.value = 40  # a script's value shows in the box
    assert box.text.value == "40"


def test_parse_integer_says_what_it_takes():
    assert parse_integer("+7", "layer", 0, 29) == 7
    with pytest.raises(ValueError, match=r"layer '1.5': type a whole number from 0 to 29"):
        parse_integer("1.5", "layer", 0, 29)
    with pytest.raises(ValueError, match=r"layer 30 is out of range: type a whole number from 0 to 29"):
        parse_integer("30", "layer", 0, 29)


class FakeSession:
    """What the two views ask of a session: requests are recorded, never answered."""

    def __init__(self, layers: int = 30) -> None:
        self.asked: list[str] = []
        self.layers = layers

    def on_described(self, callback):
        callback()

    def describe(self, tokens=None, step=None):
        return tuple(SimpleNamespace(layer=i) for i in range(self.layers)) + (SimpleNamespace(layer=None),)

    def _job(self, what):
        self.asked.append(what)
        job: Job = Job(what)
        job.set_running_or_notify_cancel()
        return job

    def generate(self, prompt, max_tokens=8, **kwargs):
        return self._job(f"generate {max_tokens}")

    def steering_vector(self, positive, negative, layer, **kwargs):
        return self._job(f"vector {layer}")


@pytest.mark.parametrize("typed", ["1.5", "-1", "", "abc"])
def test_the_generation_view_asks_nothing_while_its_box_refuses(typed):
    session = FakeSession()
    view = GenerationView(session, lambda: "The capital of France is")
    try:
        view.tokens_input.text.value = typed
        view.generate_button.click()
        assert session.asked == [] and "type a whole number" in view.message.value
        view.tokens_input.text.value = "3"
        view.generate_button.click()
        assert session.asked == ["generate 3"]
    finally:
        view.close()


@pytest.mark.parametrize("layers, default", [(30, 8), (2, 1)])
def test_the_steering_tab_opens_on_defaults_that_work_and_refuses_a_layer_past_the_model(layers, default):
    session = FakeSession(layers)
    panel = SteerPanel(session, lambda: "The Eiffel Tower is in the city of")
    try:
        assert panel.layer_input.value == default and panel.coefficient_slider.value == 2.0
        assert "Rome" in panel.positive_box.value and "Paris" in panel.negative_box.value
        assert "toward ' Rome'" in panel.message.value  # the defaults say what they do
        for typed in ("1.5", "-1", str(layers)):
            panel.layer_input.text.value = typed
            panel.run()
            assert session.asked == [] and f"from 0 to {layers - 1}" in panel.message.value
        panel.layer_input.text.value = "0"
        panel.run()
        assert session.asked == ["vector 0"]
    finally:
        panel.close()
    chosen = SteerPanel(FakeSession(), lambda: "x", layer=3)
    assert chosen.layer_input.value == 3  # a caller's layer is kept
    chosen.close()


def test_a_new_generation_takes_the_old_branch_away():
    session = FakeSession()
    view = GenerationView(session, lambda: "The capital of France is")
    try:
        view.branch_output.value, view.branch_result = "<table>old branch</table>", object()
        view.generate(3)
        assert view.branch_output.value == "" and view.branch_result is None and session.asked == ["generate 3"]
    finally:
        view.close()
