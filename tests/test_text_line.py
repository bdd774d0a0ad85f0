"""`TextLine`: what a view says is drawn whole (wrapped) and as text, never as markup."""

from __future__ import annotations

from nnterp_widgets.widgets.text_line import TextLine


def test_a_line_wraps_and_escapes_what_it_says():
    line = TextLine()
    assert line.value == "" and line.text == ""
    long = "⚠ MemoryRefused: " + "shorten the prompt " * 30 + "to about 8178 tokens <b>or</b> fewer & retry"
    line.text = long
    assert line.text == long
    assert "white-space: pre-wrap" in line.value and "overflow-wrap: anywhere" in line.value
    assert "&lt;b&gt;or&lt;/b&gt;" in line.value and "&amp; retry" in line.value and "<b>" not in line.value
    assert "8178 tokens" in line.value  # nothing cut
    line.text = ""
    assert line.value == ""
    assert TextLine("said at the start").value.count("said at the start") == 1
