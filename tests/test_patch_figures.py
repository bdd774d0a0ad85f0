"""The interventions' data objects and pictures on hand-built data (no engine): shapes
checked when built, the heatmap holds the effect exactly, token text only escaped, the
HTML export self-contained."""

from __future__ import annotations

import html
import re

import numpy as np
import pytest

from nnterp_widgets.interventions.patching import PairLens, PatchResult, normalized_effect
from nnterp_widgets.interventions.ablation import ablation_delta
from nnterp_widgets.requests.lens import LensGrid
from nnterp_widgets.requests.common import Tokens
from nnterp_widgets.figures.html import patch_section
from nnterp_widgets.widgets.export import export_html, export_patch_html
from nnterp_widgets.figures.patching import pair_figure, patch_figure
from nnterp_widgets.figures.tokens import show_token
from test_export import _decode, _figures

XSS = "<img src=x onerror=alert(1)>"
CLEAN = Tokens((1, 2, 3, 4), ("The", " " + XSS, " $x$", " in"))
CORRUPTED = Tokens((1, 5, 3, 4), ("The", " Rome", " $x$", " in"))


def result(site="layer_output", columns=4, **changes) -> PatchResult:
    patched = np.linspace(-1.0, 3.0, 3 * columns, dtype=np.float32).reshape(3, columns)
    fields = dict(
        site=site,
        clean=CLEAN,
        corrupted=CORRUPTED,
        answer=7,
        foil=8,
        answer_text=" Paris",
        foil_text=" <b>Rome</b>",
        clean_metric=2.5,
        corrupted_metric=-0.5,
        patched=patched,
        requests=2,
    )
    fields.update(changes)
    return PatchResult(**fields)


def test_effect_is_normalized_and_end_points_exact():
    r = result()
    np.testing.assert_array_equal(r.effect, (r.patched.astype(np.float64) + 0.5) / 3.0)
    assert r.end_points == (1.0, 0.0)
    assert normalized_effect(np.float32(2.5), 2.5, -0.5) == 1.0
    assert r.column_labels() == list(CLEAN.texts)
    heads = result(site="attention_head_outputs", columns=2)
    assert heads.per_head and heads.column_labels() == ["head 0", "head 1"]


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(site="mlp_input"), "unknown site 'mlp_input'; the sites are layer_output"),
        (dict(corrupted=Tokens((1,), ("The",))), "the clean prompt has 4 tokens and the corrupted one 1"),
        (dict(patched=np.zeros(4, np.float32)), "patched must be [layers, columns]"),
        (dict(patched=np.zeros((3, 5), np.float32)), "patched has 5 columns for 4 positions"),
        (dict(patched=np.full((3, 4), np.inf, np.float32)), "not finite"),
        (dict(corrupted_metric=2.5), "the clean and corrupted metrics are equal"),
    ],
)
def test_patch_result_is_checked(changes, message):
    with pytest.raises(ValueError) as error:
        result(**changes)
    assert message in str(error.value)


def test_patch_result_is_immutable():
    r = result()
    with pytest.raises(AttributeError):
        r.site = "mlp_output"


def test_ablation_delta():
    clean = np.array([0.1, 0.6, 0.3], np.float32)
    ablated = np.array([0.5, 0.2, 0.3], np.float32)
    delta = ablation_delta(clean, ablated, [(1, 0)], k=2)
    np.testing.assert_array_equal(delta.ids, [1, 2])
    np.testing.assert_array_equal(delta.ablated_ids, [0, 2])
    np.testing.assert_allclose(delta.delta, [-0.4, 0.0], atol=1e-7)
    assert delta.top1_delta == pytest.approx(-0.4) and delta.heads == ((1, 0),)
    with pytest.raises(ValueError, match="differ in shape"):
        ablation_delta(clean, ablated[:2])


def test_patch_figure_holds_the_effect_and_escapes_tokens():
    r = result()
    fig = patch_figure(r, selected=1)
    heat = fig.data[0]
    np.testing.assert_array_equal(heat.z, r.effect.astype(np.float32))
    assert list(fig.layout.xaxis.ticktext) == ["The", "␣&lt;img␣src=x␣onerror=alert(1)&gt;", "␣&#36;x&#36;", "␣in"]
    assert heat.customdata[2][1][1] == "␣&lt;img␣src=x␣onerror=alert(1)&gt;"
    assert heat.customdata[2][1][0] == "layers[2]"
    assert heat.customdata[2][1][2] == float(r.patched[2, 1])
    assert list(heat.customdata[2][1][3:]) == [r.clean_metric, r.corrupted_metric]  # hover: all four numbers
    assert "%{customdata[3]" in heat.hovertemplate and "%{customdata[4]" in heat.hovertemplate
    assert XSS not in heat.hovertemplate and "<b>" not in fig.layout.title.text
    (shape,) = fig.layout.shapes
    assert (shape.x0, shape.x1, shape.y0, shape.y1) == (0.5, 1.5, -0.5, 2.5)
    assert fig.layout.yaxis.autorange == "reversed"
    assert heat.zmid == 0 and heat.zmax == -heat.zmin == pytest.approx(np.abs(r.effect).max())
    text = fig.to_json()
    assert XSS not in text and "<b>Rome" not in text


def test_head_figure():
    r = result(site="attention_head_outputs", columns=2)
    fig = patch_figure(r, selected=0)
    assert list(fig.layout.xaxis.ticktext) == ["head 0", "head 1"]
    assert "head %{x:d}" in fig.data[0].hovertemplate
    assert len(fig.layout.shapes) == 1
    with pytest.raises(IndexError):
        patch_figure(r, selected=2)


def _lens(tokens: Tokens) -> LensGrid:
    layers, n, k = 3, len(tokens), 2
    return LensGrid(
        tokens,
        np.zeros((layers, n, k), np.int64),
        np.full((layers, n, k), 0.5, np.float32),
        tuple(tuple(("a", "b") for _ in range(n)) for _ in range(layers)),
        np.zeros(k, np.int64),
        np.full(k, 0.5, np.float32),
    )


def pair() -> PairLens:
    first = np.arange(12, dtype=np.float32).reshape(3, 4)
    return PairLens(_lens(CLEAN), _lens(CORRUPTED), 7, 8, " Paris", " Rome", first, first * 0.5)


def test_pair_lens_and_figure():
    p = pair()
    np.testing.assert_array_equal(p.difference, np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5)
    fig = pair_figure(p, selected=3)
    np.testing.assert_array_equal(fig.data[0].z, p.difference)
    assert fig.data[0].customdata[0][1][1] == "␣&lt;img␣src=x␣onerror=alert(1)&gt;"
    assert fig.data[0].customdata[0][1][2] == "␣Rome"
    assert len(fig.layout.shapes) == 1
    # The two prompts are called what the patching panel's boxes call them.
    named = pair_figure(p, names=("clean", "corrupted"))
    assert named.layout.title.text.endswith("clean − corrupted") and "first" not in named.layout.title.text
    assert "clean %{customdata[3]" in named.data[0].hovertemplate
    with pytest.raises(ValueError, match="first_diff is"):
        PairLens(_lens(CLEAN), _lens(CORRUPTED), 7, 8, "a", "b", np.zeros((3, 3)), np.zeros((3, 4)))


def test_patch_html(tmp_path):
    r = result()
    path = tmp_path / "patch.html"
    page = export_patch_html(r, pair=pair(), selected=1, path=path)
    assert path.read_text(encoding="utf-8") == page
    assert page.startswith("<!DOCTYPE html>") and "Plotly.newPlot" in page
    assert not any("src=" in tag.lower() for tag in re.findall(r"<script\b[^>]*>", page, re.I))
    assert XSS not in page and "<b>Rome" not in page
    assert html.escape(show_token(" " + XSS)) in page and "&lt;b&gt;Rome&lt;/b&gt;" in page
    figures = _figures(page)
    assert set(figures) == {"nnw-patch", "nnw-pair"}
    np.testing.assert_array_equal(_decode(figures["nnw-patch"]["data"][0]["z"]), r.effect.astype(np.float32))
    assert len(figures["nnw-pair"]["layout"]["shapes"]) == 1
    chips = re.findall(r'<span class="chip( selected)?" title="token (\d+)">', page)
    assert [bool(s) for s, _ in chips] == [False, True, False, False] * 2
    alone = export_patch_html(result(site="attention_head_outputs", columns=2), selected=1)
    assert set(_figures(alone)) == {"nnw-patch"} and 'class="chip selected"' not in alone


def test_explorer_page_carries_the_sweep():
    # The explorer's page with a sweep: one plotly.js, the patching section after the
    # prompt's figures, its map and the pair's with the page's selected token outlined.
    from test_export import synthetic_result, synthetic_tree

    r, p = result(), pair()
    page = export_html(
        synthetic_result(), synthetic_tree(), selected_token=2, sections=[patch_section(r, p, 2, plotlyjs=False)]
    )
    figures = _figures(page)
    assert set(figures) == {"nnw-attention", "nnw-lens", "nnw-patch", "nnw-pair"}
    np.testing.assert_array_equal(_decode(figures["nnw-patch"]["data"][0]["z"]), r.effect.astype(np.float32))
    np.testing.assert_array_equal(_decode(figures["nnw-pair"]["data"][0]["z"]), p.difference)
    for key in ("nnw-patch", "nnw-pair"):
        (shape,) = figures[key]["layout"]["shapes"]
        assert (shape["x0"], shape["x1"]) == (1.5, 2.5)
    assert page.count("Plotly.newPlot") == 4 and page.count("window.PlotlyConfig") == 1  # plotly.js once
    assert page.index("Activation patching") > page.index('id="nnw-lens"')
    assert XSS not in page and "<b>Rome" not in page
    without = export_html(synthetic_result(), synthetic_tree())
    assert "Activation patching" not in without and set(_figures(without)) == {"nnw-attention", "nnw-lens"}


def test_explorer_page_outlines_no_head_for_a_token():
    from test_export import synthetic_result, synthetic_tree

    heads = result("attention_head_outputs", 2)
    page = export_html(
        synthetic_result(),
        synthetic_tree(),
        selected_token=1,
        sections=[patch_section(heads, None, -1, plotlyjs=False)],
    )
    assert not _figures(page)["nnw-patch"]["layout"].get("shapes")
