"""The box a tool takes a token's text in (issue 36): it shows the leading space (␣), says
how many tokens the text is, and offers the spaced form where that is one token; the
tools' answer and foil boxes are such boxes, and the attribution status says the largest
head's sign."""

from __future__ import annotations

import pytest

from nnterp_widgets.checkpoints import checkpoint
from nnterp_widgets.widgets.token_box import TokenBox


class Described:
    """A session that is described at once, with the tiny checkpoint's tokenizer."""

    def __init__(self) -> None:
        from transformers import AutoTokenizer

        self._tokenizer = AutoTokenizer.from_pretrained(str(checkpoint("qwen2")))

    def on_described(self, callback):
        callback()

    def tokenizer(self):
        return self._tokenizer


@pytest.fixture(scope="module")
def session():
    return Described()


def test_the_box_shows_the_leading_space_and_counts_the_tokens(session):
    box = TokenBox(session, " Paris", description="answer")
    assert box.value == " Paris" and "␣Paris · one token" in box.hint.value
    assert box.spaced_button.layout.display == "none"
    box.value = " ocean"
    assert "3 tokens" in box.hint.value and "give one token" in box.hint.value


def test_a_word_without_its_space_is_said_and_the_spaced_one_offered(session):
    box = TokenBox(session, "Paris", description="answer")
    assert "2 tokens" in box.hint.value and box.spaced_button.layout.display != "none"
    assert "␣Paris" in box.spaced_button.description
    box.spaced_button.click()
    assert box.value == " Paris" and box.text.value == " Paris" and "one token" in box.hint.value
    box.text.value = "Rome"  # typed in the browser's box: the value follows
    assert box.value == "Rome" and box.spaced_button.layout.display != "none"


def test_the_tools_answer_boxes_are_token_boxes(session):
    from nnterp_widgets.widgets.attribution import AttributionPanel
    from nnterp_widgets.widgets.occlusion import OcclusionPanel
    from nnterp_widgets.widgets.patching import PatchPanel

    for view in (AttributionPanel(session, "x"), OcclusionPanel(session, "x"), PatchPanel(session)):
        try:
            assert isinstance(view.answer_box, TokenBox) and view.answer_box.hint.value
        finally:
            view.close()
