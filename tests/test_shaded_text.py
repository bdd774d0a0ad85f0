"""The shaded text (figures/shaded.py, widgets/shaded_text.py) and occlusion drawn as it:
data first, then the widget, then the occlusion view on a fake session (no engine). The
browser's side is tests/browser/test_shaded_text_js.py."""

from __future__ import annotations

import numpy as np
import pytest

from nnterp_widgets.figures import ShadedText, occlusion_text, show_token
from nnterp_widgets.widgets.occlusion import OcclusionPanel
from nnterp_widgets.widgets.shaded_text import ShadedTextView
from test_asking import FakeSession, occlusion


def test_values_shade_by_size_against_the_largest_and_the_strongest_come_first():
    shaded = ShadedText.of(["a", " b", "<i>c</i>", "\n"], [0.5, -2.0, np.nan, 1.0], unit="Δ logit")
    assert shaded.tokens == ("a", "␣b", "<i>c</i>", "↵")  # the one token rule; markup stays text
    assert shaded.half == 2.0
    assert [shaded.alpha(i) for i in range(4)] == [0.25, 1.0, 0.0, 0.5]
    assert shaded.strongest(2) == [(1, "␣b", -2.0), (3, "↵", 1.0)]
    assert len(shaded.strongest(10)) == 3  # NaN (not known yet) is never listed
    assert shaded.notes[1] == "1: ␣b · Δ logit -2.000" and shaded.notes[2] == "2: <i>c</i>"
    assert not shaded.values.flags.writeable


def test_all_zero_or_unknown_values_shade_nothing_and_a_length_mismatch_is_refused():
    assert ShadedText.of(["a", "b"], [0.0, 0.0]).alpha(0) == 0.0
    assert ShadedText.of(["a"], [np.nan]).strongest() == []
    with pytest.raises(ValueError, match="3 values for 2 tokens"):
        ShadedText.of(["a", "b"], [1, 2, 3])


def test_the_page_export_draws_each_shade_by_the_one_rule_and_keeps_markup_as_text():
    from nnterp_widgets.figures.html import occlusion_section
    from nnterp_widgets.figures.shaded import FULL_SHADE, NEGATIVE, POSITIVE, shaded_html

    shaded = ShadedText.of(["a", " b", "<i>c</i>"], [1.0, -2.0, np.nan], caption="Δ of <b>x</b>", unit="Δ")
    assert shaded.shade(1) == f"rgba({NEGATIVE}, {FULL_SHADE:.3f})" and shaded.shade(0).startswith(f"rgba({POSITIVE}, ")
    assert shaded.shade(2) == ""  # not known: plain
    page = shaded_html(shaded)
    assert page.count('class="shaded-token"') == 3 and f"background: {shaded.shade(1)}" in page
    assert "<i>" not in page and "&lt;i&gt;c&lt;/i&gt;" in page and "&lt;b&gt;x" in page
    assert "strongest (Δ): <code>␣b</code> -2.000, <code>a</code> +1.000" in page
    found = occlusion("The Eiffel Tower is in")
    section = occlusion_section(found, "probability")
    assert shaded_html(occlusion_text(found, "probability"), ident="nnw-occlusion") in section
    assert "plotly" not in section


def test_occlusion_text_is_each_tokens_change_with_what_it_means():
    found = occlusion("The Eiffel Tower is in")
    text = occlusion_text(found)
    np.testing.assert_allclose(text.values, found.delta_logit.astype(np.float32))
    assert text.tokens == tuple(show_token(t) for t in found.tokens.texts)
    assert text.strongest(1) == [(0, "a", -1.0)]  # the answer needed "a" most
    assert "replaced by ␣" in text.caption and "blue: ␣x needed it" in text.caption
    assert text.notes[1] == "1: ␣b · Δ logit +0.500 · Δ probability +0.1000"
    probability = occlusion_text(found, "probability")
    np.testing.assert_allclose(probability.values, found.delta_prob.astype(np.float32))
    assert probability.unit == "Δ probability"


def test_a_partial_occlusion_leaves_what_is_not_known_plain_and_says_so():
    found = occlusion("p")
    partial = type(found)(
        **{**found.__dict__, "logits": np.array([1.0, np.nan, np.nan]), "exact": np.array([True, False, False])}
    )
    text = occlusion_text(partial)
    assert text.alpha(1) == 0.0 and "not occluded yet" in text.notes[1] and "(its block)" in text.notes[1]


def test_the_view_ships_the_values_as_bytes_and_lists_the_strongest():
    view = ShadedTextView()
    shaded = ShadedText.of(["a", " b", " c"], [0.1, -3.0, 2.0], caption="cap", unit="Δ")
    view.show(shaded, strongest=2)
    np.testing.assert_array_equal(view.shown_values, shaded.values)
    assert view.tokens == ["a", "␣b", "␣c"] and view.strongest == [1, 2] and view.half == 3.0
    assert view.caption == "cap" and view.notes == list(shaded.notes)
    view.close()


def test_the_occlusion_view_shades_the_prompt_and_a_click_selects_a_token():
    session = FakeSession()
    view = OcclusionPanel(session, "The Eiffel Tower is in")
    assert view.text_view not in view.children  # nothing to shade before an answer
    view.run()
    session.asked[-1][1].finish(occlusion("The Eiffel Tower is in"))
    shown = view.wait(5)
    assert view.text_view in view.children
    np.testing.assert_allclose(view.text_view.shown_values, shown.delta_logit.astype(np.float32))
    view.text_view.selected = 2  # what a click in the browser writes
    assert view.selected_token == 2
    view.selected_token = 1  # the explorer's selection, shown in the text
    assert view.text_view.selected == 1
    view.measure_picker.value = "probability"
    np.testing.assert_allclose(view.text_view.shown_values, shown.delta_prob.astype(np.float32))
    view.close()
