"""The pictures (`figures/`) and the two views (AttentionView, LogitLens).

No engine here: the ``PromptResult`` s and panels are built by hand with numpy. These
tests check the picture — that each figure shows exactly the panel's numbers, keeps
repeated tokens apart, never lets token text become markup, stays small — and the
views' state (layer / head / selection, messages, clicks). That the panels' numbers are
the model's is tested against the engine elsewhere.

The views' widgets carry their heatmaps in column form (`figures.transport`) so that the
numbers go to the browser as binary buffers; tests check the buffers of the initial state
and of the edit messages, and the bytes at 1024 tokens.

The last two tests open the figures in headless Chromium (plotly.js as bundled with the
plotly package) to check what the hover and tick labels really show, the second through
plotly's own FigureWidget front end (widgetbundle.js, with a fake anywidget model and
tests/browser/figure_widget_harness.html); they are skipped when /usr/bin/chromium or
playwright is missing.
"""

from __future__ import annotations

import html
import math
import json
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest
from ipywidgets.widgets.widget import _remove_buffers
from plotly.callbacks import Points
from plotly.serializers import _py_to_js

from concurrent.futures import Future

from nnterp_widgets.requests.attention import QUANT, AttentionPattern
from nnterp_widgets.requests.lens import LensGrid
from nnterp_widgets.requests.prompt import PromptResult
from nnterp_widgets.requests.common import Tokens
from nnterp_widgets.widgets.attention import AttentionView
from nnterp_widgets.figures.attention import (
    ATTENTION_TICK_LABELS,
    head_scale,
    HOVER_TEXT_MAX_TOKENS,
    attention_figure,
    head_grid_figure,
)
from nnterp_widgets.figures.common import CELL_TEXT_CHARS, MAX_TICK_LABELS, escape_token
from nnterp_widgets.figures.lens import lens_figure, lens_hover, lens_table_html
from nnterp_widgets.requests.attention import mean_pool
from nnterp_widgets.figures.transport import for_widget, heatmap_matrix
from nnterp_widgets.widgets.lens import LogitLens
from nnterp_widgets.figures.tokens import show_token

from conftest import TOKEN_CASES

XSS = "<img src=x onerror=alert(1)>"
XSS_SHOWN = "&lt;img␣src=x␣onerror=alert(1)&gt;"
TEXTS = ["<s>", " the", XSS, " cat", "\n", "", "$x$", " the"]  # " the" at 1 and 7


class Source:
    """What a session gives the views (a layer's panel), from the hand-built panels."""

    def __init__(self) -> None:
        self.panels: dict = {}

    def attention(self, text, layer, key, ablate=()):
        done = Future()
        done.set_result(self.panels[(text, layer)])
        return done


SOURCE = Source()
#: id(result) -> {layer: AttentionPattern}, for the results make_result built.
_PANELS: dict = {}


def make_result(texts=TEXTS, *, layers=3, heads=4, k=3, seed=0, lens_texts=None) -> PromptResult:
    """A PromptResult with causal row-stochastic patterns and a made-up lens; every layer's
    panel is in `SOURCE` (what a session would answer) and `panel_of`. The patterns are
    multiples of 1/255, so a panel's decoded bytes and its thumbnails are the pattern."""
    rng = np.random.default_rng(seed)
    n = len(texts)
    tokens = Tokens(tuple(range(n)), tuple(texts))
    prompt = "".join(texts)
    panels = {}
    for layer in range(layers):
        a = rng.random((heads, n, n)).astype(np.float32) * np.tril(np.ones((n, n), np.float32))
        pattern = (np.rint(a / a.sum(-1, keepdims=True) * QUANT) / QUANT).astype(np.float32)
        panels[layer] = AttentionPattern.from_probabilities(tokens, layer, layers, pattern)
        SOURCE.panels[(prompt, layer)] = panels[layer]
    probs = (np.sort(rng.random((layers, n, k)), -1)[..., ::-1] / k).astype(np.float32)
    ids = rng.integers(0, 50, (layers, n, k))
    vocab = lens_texts or [f"v{i}" for i in range(50)]
    top_texts = tuple(
        tuple(tuple(vocab[ids[l, p, j] % len(vocab)] for j in range(k)) for p in range(n)) for l in range(layers)
    )
    lens = LensGrid(tokens, ids, probs, top_texts, ids[-1, -1], probs[-1, -1])
    result = PromptResult(prompt, tokens, lens, panels[0], tuple(range(layers)))
    _PANELS[id(result)] = panels
    return result


def panel_of(result: PromptResult, layer: int) -> AttentionPattern:
    return _PANELS[id(result)][layer]


def patterns(result: PromptResult) -> dict:
    """Layer -> the float pattern each layer's panel shows."""
    return {layer: panel.pattern for layer, panel in _PANELS[id(result)].items()}


def view_of(*args, **kwargs) -> AttentionView:
    """An AttentionView whose layer switches are answered by `SOURCE`."""
    return AttentionView(*args, session=SOURCE, **kwargs)


def all_strings(fig: go.Figure) -> list[str]:
    """Every string (keys too) of the figure's JSON, decoded (to_json escapes '<' as \\u003c)."""
    out = []

    def walk(node):
        if isinstance(node, str):
            out.append(node)
        elif isinstance(node, dict):
            for key, value in node.items():
                out.append(key)
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(fig.to_json()))
    return out


def assert_no_markup(fig: go.Figure) -> None:
    strings = all_strings(fig)
    assert not [s for s in strings if "<img" in s]
    assert not [s for s in strings if "onerror=alert" in s and "&lt;" not in s]
    assert any(XSS_SHOWN in s for s in strings)


def fake_click(x, y):
    return Points(point_inds=[[y, x]], xs=[x], ys=[y], trace_name="", trace_index=0)


NO_CLICK = Points(point_inds=[], xs=[], ys=[], trace_name="", trace_index=0)


# ------------------------------------------------------------------------ escape_token


@pytest.mark.parametrize("case", TOKEN_CASES, ids=lambda case: repr(case["text"]))
def test_token_rule_follows_the_shared_table(case):
    assert show_token(case["text"]) == case["shown"]
    label = escape_token(case["text"])
    assert html.unescape(label) == case["shown"]  # what plotly draws
    assert "<" not in label and ">" not in label and "$" not in label
    assert "&" not in label.replace("&lt;", "").replace("&gt;", "").replace("&amp;", "").replace("&#36;", "")


def test_escape_token_cut():
    assert escape_token(XSS, 8) == "&lt;img␣sr…"
    assert escape_token("<&>", 2) == "&lt;…"
    assert escape_token(" cat", 8) == "␣cat"


# ------------------------------------------------------------------------ attention


def test_the_colour_scale_sets_the_first_token_apart():
    from nnterp_widgets.figures.attention import SCALE_FLOOR

    sink = np.array([[1.0, 0.0, 0.0], [0.9, 0.1, 0.0], [0.8, 0.15, 0.05]], dtype=np.float32)
    assert head_scale(sink, True) == pytest.approx(0.15)  # the largest off the first column
    assert head_scale(sink, False) == 1.0  # a window without the first token: its largest
    assert head_scale(np.full((3, 3), 0.01, np.float32), True) == SCALE_FLOOR
    result = make_result()
    panel = panel_of(result, 1)
    fig = attention_figure(panel, 2)
    top = head_scale(panel.head(2), True)
    assert fig.data[0].zmax == top
    if top < 1:
        assert f"to {top:.2f}" in fig.data[0].colorbar.title.text


def test_attention_heatmap_is_the_head_exactly():
    result = make_result()
    panel = panel_of(result, 1)
    fig = attention_figure(panel, 2)
    z = fig.data[0].z
    assert z.dtype == np.float32
    assert np.array_equal(z, panel.head(2))
    assert fig.layout.title.text == "layers[1] head 2"
    assert fig.layout.yaxis.autorange == "reversed"  # query 0 on top
    assert fig.data[0].zmin == 0 and fig.data[0].zmax == head_scale(panel.head(2), True)
    assert fig.layout.uirevision  # zoom survives updates
    # z goes out as a base64 float32 typed array, not as text numbers
    z_json = json.loads(fig.to_json())["data"][0]["z"]
    assert z_json["dtype"] == "f4" and "bdata" in z_json


def test_attention_head_out_of_range_raises():
    panel = panel_of(make_result(), 0)
    with pytest.raises(IndexError, match="head 4 is out of range"):
        attention_figure(panel, 4)


def test_repeated_tokens_are_distinct_rows_and_columns():
    fig = attention_figure(panel_of(make_result(), 0), 0)
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        vals, text = list(axis.tickvals), list(axis.ticktext)
        assert vals == list(range(len(TEXTS)))
        assert text[1] == text[7] == "␣the"  # same label ...
        assert len(set(vals)) == len(vals)  # ... two positions
    assert list(fig.data[0].x) == list(fig.data[0].y) == list(range(len(TEXTS)))


def test_attention_hover_customdata_holds_texts_and_z_the_weight():
    panel = panel_of(make_result(), 2)
    fig = attention_figure(panel, 1)
    trace = fig.data[0]
    labels = [escape_token(t) for t in TEXTS]
    for q in range(len(TEXTS)):
        for k in range(len(TEXTS)):
            assert list(trace.customdata[q][k]) == [labels[q], labels[k]]
            assert trace.z[q][k] == panel.head(1)[q, k]
    template = trace.hovertemplate
    assert "%{customdata[0]}" in template and "%{customdata[1]}" in template and "%{z" in template
    for text in TEXTS[1:]:  # token text never inside the template
        if text:
            assert escape_token(text) not in template and text not in template


def test_no_token_markup_anywhere_in_the_json():
    result = make_result(lens_texts=["a", XSS, "b"])
    assert_no_markup(attention_figure(panel_of(result, 0), 0, selected_token=2))
    assert_no_markup(lens_figure(result.lens, selected_token=2))
    long_texts = [f"t{i}" for i in range(HOVER_TEXT_MAX_TOKENS + 10)]
    long_texts[0] = XSS
    assert_no_markup(attention_figure(panel_of(make_result(long_texts, layers=1, heads=1), 0), 0))
    grid_strings = all_strings(head_grid_figure(panel_of(result, 0)))
    assert not [s for s in grid_strings if "<img" in s or XSS_SHOWN in s]  # the grid shows no token text


def test_selected_token_highlights_row_and_column():
    panel = panel_of(make_result(), 0)
    assert attention_figure(panel, 0).layout.shapes == ()
    fig = attention_figure(panel, 0, selected_token=3)
    shapes = {s.name: s for s in fig.layout.shapes}
    assert set(shapes) == {"selected row", "selected column"}
    row, col = shapes["selected row"], shapes["selected column"]
    assert (row.y0, row.y1, row.x0, row.x1) == (2.5, 3.5, -0.5, len(TEXTS) - 0.5)
    assert (col.x0, col.x1, col.y0, col.y1) == (2.5, 3.5, -0.5, len(TEXTS) - 0.5)
    with pytest.raises(IndexError):
        attention_figure(panel, 0, selected_token=len(TEXTS))


def test_long_prompt_sparse_ticks_full_hover_and_size_bound():
    n = 1024
    texts = [f"w{i % 50}" for i in range(n)]
    panel = panel_of(make_result(texts, layers=1, heads=1), 0)
    fig = attention_figure(panel, 0, selected_token=700)
    assert np.array_equal(fig.data[0].z, panel.head(0))
    # visible labels: at most MAX_TICK_LABELS, every n-th, distinct positions
    for axis in (fig.layout.xaxis2, fig.layout.yaxis2):
        vals = list(axis.tickvals)
        assert 1 < len(vals) <= ATTENTION_TICK_LABELS and len(set(vals)) == len(vals)
        assert list(axis.ticktext) == [escape_token(texts[i]) for i in vals]
    # hover: the heatmap's own (hidden) axes label every position
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        assert list(axis.tickvals) == list(range(n)) and list(axis.ticktext) == texts
        assert axis.showticklabels is False
    assert fig.data[0].customdata is None
    assert "%{x}" in fig.data[0].hovertemplate and "%{y}" in fig.data[0].hovertemplate
    size = len(fig.to_json())
    assert size < 10_000_000, size  # 4 MiB of float32 as base64 plus labels: ~5.8 MB


def test_middle_prompt_keeps_customdata_with_sparse_ticks():
    n = HOVER_TEXT_MAX_TOKENS
    texts = [f"w{i}" for i in range(n)]
    fig = attention_figure(panel_of(make_result(texts, layers=1, heads=1), 0), 0)
    assert len(fig.data) == 1 and len(fig.layout.xaxis.tickvals) <= MAX_TICK_LABELS
    assert list(fig.data[0].customdata[n - 1][3]) == [f"w{n - 1}", "w3"]


def _pooled(panel: AttentionPattern, block: int) -> AttentionPattern:
    """``panel`` as a long prompt ships it: each ``block``-token square's maximum."""
    heads, n, _ = panel.quantized.shape
    cells = -(-n // block)
    padded = np.zeros((heads, cells * block, cells * block), np.uint8)
    padded[:, :n, :n] = panel.quantized
    pooled = padded.reshape(heads, cells, block, cells, block).max(axis=(2, 4))
    return AttentionPattern(panel.tokens, panel.layer, panel.num_layers, pooled, panel.thumbnails, block)


def test_pooled_heatmap_says_what_each_cell_is_the_maximum_over():
    panel = _pooled(panel_of(make_result(), 1), 3)  # 8 tokens: cells of 3, 3 and 2
    fig = attention_figure(panel, 2)
    trace = fig.data[0]
    assert np.array_equal(trace.z, panel.head(2)) and trace.z.shape == (3, 3)
    assert list(trace.x) == list(trace.y) == [0, 1, 2]  # cell indices
    assert "max over queries %{y}" in trace.hovertemplate and "keys %{x}" in trace.hovertemplate
    labels = [
        f"0..2 ({escape_token(TEXTS[0])} … {escape_token(TEXTS[2])})",
        f"3..5 ({escape_token(TEXTS[3])} … {escape_token(TEXTS[5])})",
        f"6..7 ({escape_token(TEXTS[6])} … {escape_token(TEXTS[7])})",
    ]
    for axis in (fig.layout.xaxis, fig.layout.yaxis):  # hover: each cell's token range
        assert list(axis.tickvals) == [0, 1, 2] and list(axis.ticktext) == labels
    assert list(fig.layout.xaxis2.ticktext) == ["0", "3", "6"]  # drawn: each block's first position
    assert "max of 3×3 blocks" in fig.layout.title.text and "click to zoom" in trace.hovertemplate
    assert_no_markup(fig)
    # The selected token's row and column are its cells'.
    shapes = {s.name: s for s in attention_figure(panel, 0, selected_token=4).layout.shapes}
    assert (shapes["selected row"].y0, shapes["selected row"].y1) == (0.5, 1.5)
    assert (shapes["selected column"].x0, shapes["selected column"].x1) == (0.5, 1.5)
    assert panel.zoom_origin(2, 0, 4) == (4, 0)  # centred on the cell, moved inside the prompt


def test_zoom_window_heatmap_is_at_its_token_positions():
    full = panel_of(make_result(), 1)
    window = AttentionPattern(
        full.tokens, 1, full.num_layers, full.quantized[:, 4:8, 2:6].copy(), full.thumbnails, 1, 4, 2
    )
    fig = attention_figure(window, 1, selected_token=3)
    trace = fig.data[0]
    assert list(trace.y) == [4, 5, 6, 7] and list(trace.x) == [2, 3, 4, 5]
    assert np.array_equal(trace.z, full.head(1)[4:8, 2:6])
    assert list(trace.customdata[0][1]) == [escape_token(TEXTS[4]), escape_token(TEXTS[3])]
    assert list(fig.layout.xaxis.ticktext) == [escape_token(t) for t in TEXTS[2:6]]
    assert "queries 4..7, keys 2..5" in fig.layout.title.text
    # Query 3 is above the window: only its key column is outlined, over the window's rows.
    (column,) = fig.layout.shapes
    assert column.name == "selected column" and (column.x0, column.y0, column.y1) == (2.5, 3.5, 7.5)


def test_panel_facts_are_checked():
    full = panel_of(make_result(), 0)
    with pytest.raises(ValueError, match="blocks of 3 must be"):
        AttentionPattern(full.tokens, 0, 3, full.quantized[:, :2, :2].copy(), full.thumbnails, 3)
    with pytest.raises(ValueError, match="does not fit 8 tokens"):
        AttentionPattern(full.tokens, 0, 3, full.quantized[:, :4, :4].copy(), full.thumbnails, 1, 6, 0)


# ------------------------------------------------------------------------ head grid


def test_head_grid_one_trace_per_head_bounded_by_max_side():
    panel = panel_of(make_result([f"t{i}" for i in range(100)], layers=1, heads=6), 0)
    fig = head_grid_figure(panel, max_side=16)
    assert len(fig.data) == 6
    assert [a.text for a in fig.layout.annotations] == [str(h) for h in range(6)]  # five columns: numbers
    for h, trace in enumerate(fig.data):
        z = np.asarray(trace.z)
        assert z.dtype == np.float32 and z.shape[0] <= 16 and z.shape[1] <= 16 and z.size <= 16**2
        assert np.allclose(z, mean_pool(panel.thumbnails[h], 16))  # the engine's thumbnail, pooled further
        assert np.allclose(panel.thumbnails[h], mean_pool(panel.head(h), 64))
        assert (trace.zmin, trace.zmax) == (0, head_scale(z, True))  # its own scale, as the heatmap's
        assert trace.hovertemplate == f"head {h}<br>weight %{{z:.3f}}<extra></extra>"
    small = head_grid_figure(panel_of(make_result(), 0))  # short prompt: full resolution
    assert np.array_equal(small.data[0].z, panel_of(make_result(), 0).head(0))


def test_mean_pool():
    a = np.arange(10 * 7, dtype=np.float32).reshape(10, 7)
    pooled = mean_pool(a, 4)  # blocks of 3 rows x 2 cols; last blocks narrower
    assert pooled.shape == (4, 4)
    assert pooled[0, 0] == a[0:3, 0:2].mean()
    assert pooled[3, 3] == a[9:10, 6:7].mean()
    assert np.isclose(pooled[1, 2], a[3:6, 4:6].mean())
    assert mean_pool(a, 64).shape == (10, 7)


# ------------------------------------------------------------------------ lens


def test_lens_cells_are_top1_and_hover_is_topk():
    result = make_result(lens_texts=["a", " b", XSS, "\n"], k=4)
    lens = result.lens
    fig = lens_figure(lens)
    trace = fig.data[0]
    assert np.array_equal(trace.z, lens.top1_probs()) and trace.z.dtype == np.float32
    assert [list(row) for row in trace.text] == [
        [escape_token(t, CELL_TEXT_CHARS) for t in row] for row in lens.top1_texts()
    ]
    assert trace.texttemplate == "%{text}"
    assert list(fig.layout.yaxis.ticktext) == lens.layer_labels  # layers[0] first, on top
    assert fig.layout.yaxis.autorange == "reversed"
    assert list(fig.layout.xaxis.tickvals) == list(range(len(TEXTS)))
    # Each tick names its position, then its token (a lens window can start anywhere).
    assert list(fig.layout.xaxis.ticktext) == [f"{i} {escape_token(t)}" for i, t in enumerate(TEXTS)]
    for layer in range(lens.num_layers):
        for position in range(len(TEXTS)):
            top = lens_hover(lens, layer, position)
            assert [t for t, _ in top] == list(lens.top_texts[layer][position])
            assert [np.float32(p) for _, p in top] == list(lens.top_probs[layer, position])  # exact
            cell = list(trace.customdata[layer][position])
            assert cell == [lens.layer_labels[layer], escape_token(TEXTS[position])] + [
                escape_token(t) for t, _ in top
            ] + [p for _, p in top]
    assert "img" not in trace.hovertemplate and "cat" not in trace.hovertemplate  # no token text in it


def test_lens_selected_column():
    lens = make_result().lens
    assert lens_figure(lens).layout.shapes == ()
    (shape,) = lens_figure(lens, selected_token=5).layout.shapes
    assert (shape.x0, shape.x1, shape.y0, shape.y1) == (4.5, 5.5, -0.5, lens.num_layers - 0.5)


# ------------------------------------------------------------------------ AttentionView


def test_attention_view_layer_and_head_update_the_figure():
    result = make_result()
    view = view_of(result, layer=1, head=2)
    assert np.array_equal(heatmap_matrix(view.figure.data[0]), patterns(result)[1][2])
    assert len(view.grid.data) == 4
    assert np.array_equal(heatmap_matrix(view.grid.data[3]), patterns(result)[1][3])
    view.head = 3
    assert np.array_equal(heatmap_matrix(view.figure.data[0]), patterns(result)[1][3])
    assert view.figure.layout.title.text == "layers[1] head 3" and view.head_input.value == "3"
    view.layer_input.value = "2"  # the text box drives the trait
    assert view.layer == 2 and view.panel.layer == 2
    assert np.array_equal(heatmap_matrix(view.figure.data[0]), patterns(result)[2][3])
    assert np.array_equal(heatmap_matrix(view.grid.data[0]), patterns(result)[2][0])
    assert view.message.value == ""


@pytest.mark.parametrize("name, bad", [("layer", 7), ("layer", -1), ("head", 4), ("head", -2)])
def test_attention_view_out_of_range_keeps_the_view(name, bad):
    result = make_result()
    view = view_of(result, layer=1, head=2)
    before = heatmap_matrix(view.figure.data[0])
    box = view.layer_input if name == "layer" else view.head_input
    box.value = str(bad)
    assert (view.layer, view.head) == (1, 2) and box.value == ("1" if name == "layer" else "2")
    assert (
        f"{name} {bad} is out of range" in view.message.value and "still showing layers[1] head 2" in view.message.value
    )
    assert np.array_equal(heatmap_matrix(view.figure.data[0]), before)
    setattr(view, name, bad)  # the trait itself (as a link would set it)
    assert (view.layer, view.head) == (1, 2) and np.array_equal(heatmap_matrix(view.figure.data[0]), before)


def test_attention_view_clicks():
    result = make_result()
    view = view_of(result)
    view.figure.data[0]._dispatch_on_click(fake_click(x=1, y=4), None)  # the registered callback
    assert view.selected_token == 4
    assert {s.name for s in view.figure.layout.shapes} == {"selected row", "selected column"}
    assert view.figure.layout.shapes[0].y0 == 3.5
    view.figure.data[0]._dispatch_on_click(NO_CLICK, None)
    assert view.selected_token == 4
    for index, trace in enumerate(view.grid.data):  # plotly calls every trace; only one has points
        trace._dispatch_on_click(fake_click(0, 0) if index == 2 else NO_CLICK, None)
    assert view.head == 2 and view.figure.layout.title.text == "layers[0] head 2"
    view._on_main_click(None, fake_click(x=0, y=6))
    assert view.selected_token == 6 and view.figure.layout.shapes[0].y0 == 5.5
    view.selected_token = 99
    assert view.selected_token == 6 and "token 99 is out of range" in view.message.value


def test_attention_view_update_clamps():
    view = view_of(make_result(), layer=2, head=3)
    view.selected_token = 6
    shorter = make_result(["a", "b", "a"], layers=2, heads=2, seed=1)
    view.update(shorter)
    assert (view.layer, view.head, view.selected_token) == (1, 1, 2)
    assert "layer 2 is not in this prompt" in view.message.value
    assert "head 3 is out of range" in view.message.value and "selected 2" in view.message.value
    assert np.array_equal(heatmap_matrix(view.figure.data[0]), patterns(shorter)[1][1])
    assert len(view.grid.data) == 2 and view.layer_input.value == "1"
    view.update(make_result(seed=2))  # still valid: kept, no message
    assert (view.layer, view.head, view.selected_token) == (1, 1, 2) and view.message.value == ""
    # a long prompt changes the figure's traces; clicks still reach the view
    long = make_result([f"t{i}" for i in range(HOVER_TEXT_MAX_TOKENS + 1)], layers=2, heads=2)
    view.update(long)
    assert len(view.figure.data) == 2 and np.array_equal(heatmap_matrix(view.figure.data[0]), patterns(long)[1][1])
    view.figure.data[0]._dispatch_on_click(fake_click(x=3, y=200), None)
    assert view.selected_token == 200
    view.update(make_result())
    assert len(view.figure.data) == 1 and view.figure.data[0].customdata is not None
    assert view.selected_token == len(TEXTS) - 1


def test_attention_view_without_result_and_without_patterns():
    view = view_of(layer=5, head=1)
    assert view.layer == 5 and len(view.figure.data) == 0
    view.set_status("busy", "running the prompt")
    assert view.status_label.value == "busy… running the prompt"
    result = make_result()
    view.update(result)
    assert view.layer == 2 and "layer 5 is not in this prompt" in view.message.value
    view.set_status("error", "engine died")
    assert view.status_label.value == "error: engine died"
    none = PromptResult(result.prompt, result.tokens, result.lens)
    view.update(none)
    assert "no attention pattern" in view.message.value
    with pytest.raises(ValueError):
        view.set_status("weird")


# ------------------------------------------------------------------------ LogitLens


def test_logit_lens_view():
    result = make_result()
    view = LogitLens(result)
    assert np.array_equal(heatmap_matrix(view.figure.data[0]), result.lens.top1_probs())
    view.figure.data[0]._dispatch_on_click(fake_click(x=5, y=1), None)
    assert view.selected_token == 5
    (shape,) = view.figure.layout.shapes
    assert shape.x0 == 4.5
    view.selected_token = 8
    assert view.selected_token == 5 and "token 8 is out of range" in view.message.value
    shorter = make_result(["x", "y"], seed=3)
    view.update(shorter)
    assert view.selected_token == 1 and "selected 1" in view.message.value
    assert np.array_equal(heatmap_matrix(view.figure.data[0]), shorter.lens.top1_probs())
    assert view.figure.layout.shapes[0].x0 == 0.5
    view.set_status("busy")
    assert view.status_label.value == "busy…"


def test_the_lens_table_holds_every_cells_whole_word_escaped_and_its_top_k():
    from test_export import XSS, synthetic_result

    from nnterp_widgets.figures import lens_table_html

    lens = synthetic_result().lens
    page = lens_table_html(lens, selected_token=2)
    assert XSS not in page and html.escape(show_token(XSS)) in page  # markup in a word is text
    for layer in range(lens.num_layers):
        for column in range(len(lens.tokens)):
            word = lens.top_texts[layer][column][0]
            assert f">{html.escape(show_token(word))}</td>" in page  # whole, never cut
    top = lens.top_texts[0][3]
    assert (
        html.escape(" · ".join(f"{show_token(t)} {p:.3f}" for t, p in zip(top, lens.top_probs[0, 3], strict=True)))
        in page
    )
    assert page.count('class="nnw-lens-selected"') == lens.num_layers + 1  # the column, head included
    assert f"background:rgba(66, 133, 244,{0.6 * float(lens.top_probs[1, 0, 0]):.3f})" in page


def test_the_lens_view_shows_the_table_instead_of_the_heatmap_and_back():
    result = make_result()
    view = LogitLens(result)
    assert view.figure in view.children and view.table not in view.children
    view.view_picker.value = "table"
    assert view.table in view.children and view.figure not in view.children
    assert view.table.value == lens_table_html(result.lens, view.selected_token)
    view.selected_token = 3
    assert view.table.value == lens_table_html(result.lens, 3)
    view.view_picker.value = "heatmap"
    assert view.figure in view.children and view.table not in view.children
    assert view.figure.layout.shapes[0].x0 == 2.5  # the selection made in the table mode
    view.close()


# ------------------------------------------------------------------------ in a widget: columns, binary


def wire(value) -> tuple[dict, list]:
    """What ipywidgets sends for a synced value: the JSON part and the binary buffers."""
    state, _, buffers = _remove_buffers({"v": _py_to_js(value, None)})
    return state, buffers


def wire_bytes(value) -> int:
    """Bytes on the wire: the JSON text of the non-buffer part plus the buffers."""
    state, buffers = wire(value)
    return len(json.dumps(state, separators=(",", ":"))) + sum(memoryview(b).nbytes for b in buffers)


def binary(spec, dtype=np.float32) -> np.ndarray:
    """A ``_py_to_js`` array spec, checked to be a binary buffer of ``dtype``, as numpy."""
    assert isinstance(spec, dict) and isinstance(spec["buffer"], memoryview), type(spec)
    assert spec["dtype"] == np.dtype(dtype).name
    return np.frombuffer(spec["buffer"], dtype=dtype)


def widget_data(widget: go.FigureWidget) -> list:
    widget._repr_mimebundle_()  # what displaying it does: _widget_data = the figure now
    return _py_to_js(widget._widget_data, None)


def messages(widget: go.FigureWidget) -> list[tuple[str, dict]]:
    """Collects the Python -> JS edit messages the widget sends from now on."""
    sent = []
    widget.observe(
        lambda change: change["new"] is not None and sent.append((change["name"], change["new"])),
        ["_py2js_restyle", "_py2js_update", "_py2js_addTraces", "_py2js_relayout"],
    )
    return sent


def test_for_widget_puts_the_attention_heatmap_in_columns():
    panel = panel_of(make_result(), 1)
    fig = attention_figure(panel, 2, selected_token=3)
    columns = for_widget(fig)
    before, trace = fig.data[0], columns.data[0]
    n = len(TEXTS)
    assert trace.z.shape == (n * n,) and trace.z.dtype == np.float32
    assert trace.x.dtype == trace.y.dtype == np.uint8
    assert list(trace.x) == list(range(n)) * n and list(trace.y) == [q for q in range(n) for _ in range(n)]
    assert np.array_equal(heatmap_matrix(trace), panel.head(2))
    assert np.array_equal(heatmap_matrix(before), panel.head(2))  # the figure itself stays 2-D
    assert np.asarray(before.z).shape == (n, n)
    labels = [escape_token(t) for t in TEXTS]
    cells = heatmap_matrix(trace, "customdata")
    assert cells.shape == (n, n, 2)
    assert all(list(cells[q, k]) == [labels[q], labels[k]] for q in range(n) for k in range(n))
    for name in ("hovertemplate", "zmin", "zmax", "colorscale", "name"):
        assert trace[name] == before[name]
    assert columns.layout == fig.layout


def test_for_widget_long_attention_lens_and_grid():
    long_texts = [f"t{i}" for i in range(300)]
    fig = attention_figure(panel_of(make_result(long_texts, layers=1, heads=1), 0), 0)
    columns = for_widget(fig)
    assert columns.data[0].x.dtype == np.uint16 and columns.data[0].z.shape == (300 * 300,)
    assert np.array_equal(heatmap_matrix(columns.data[0]), fig.data[0].z)
    assert columns.data[1] == fig.data[1] and columns.layout == fig.layout  # the tick-label trace
    assert columns.data[0].hovertemplate == fig.data[0].hovertemplate and columns.data[0].customdata is None

    lens = make_result(lens_texts=["a", XSS, "\n"], k=4).lens
    fig = lens_figure(lens)
    trace = for_widget(fig).data[0]
    assert trace.z.dtype == np.float32 and trace.z.shape == (lens.num_layers * len(TEXTS),)
    assert np.array_equal(heatmap_matrix(trace), lens.top1_probs())
    assert heatmap_matrix(trace, "text").tolist() == [list(row) for row in fig.data[0].text]
    assert heatmap_matrix(trace, "customdata").tolist() == np.asarray(fig.data[0].customdata).tolist()
    assert trace.texttemplate == "%{text}" and trace.hovertemplate == fig.data[0].hovertemplate

    panel = panel_of(make_result([f"t{i}" for i in range(100)], layers=1, heads=6), 0)
    grid = head_grid_figure(panel, max_side=16)
    columns = for_widget(grid)
    for h, (old, new) in enumerate(zip(grid.data, columns.data, strict=True)):
        assert new.z.ndim == 1 and new.x.dtype == np.uint8
        assert np.array_equal(heatmap_matrix(new), mean_pool(panel.thumbnails[h], 16))
        assert (new.xaxis, new.yaxis, new.zmax, new.hovertemplate) == (
            old.xaxis,
            old.yaxis,
            old.zmax,
            old.hovertemplate,
        )


def test_for_widget_keeps_heatmaps_it_cannot_put_in_columns():
    z = np.arange(6, dtype=np.float32).reshape(2, 3)
    for trace in (
        go.Heatmap(z=z, x=["a", "b", "c"]),
        go.Heatmap(z=z, x0=5, dx=2),
        go.Heatmap(z=z, x=[0, 2, 1]),
        go.Heatmap(z=z, x=[0, 1, 2, 3]),
        go.Heatmap(z=z, transpose=True),
        go.Heatmap(z=z, text=[["a", "b"], ["c", "d"]]),
    ):
        assert for_widget(go.Figure(trace)).data[0] == trace
    scatter = go.Scatter(x=[1, 2], y=[3, 4])
    assert for_widget(go.Figure(scatter)).data[0] == scatter
    columns = for_widget(go.Figure(go.Heatmap(z=z, x=[-1.5, 0.5, 2.0], hovertext=[["a", "b", "c"], ["d", "e", "f"]])))
    assert columns.data[0].x.dtype == np.float64 and list(columns.data[0].hovertext) == list("abcdef")
    assert np.array_equal(heatmap_matrix(columns.data[0]), z)


def test_attention_view_sends_the_pattern_as_binary():
    result = make_result()
    view = view_of(result, layer=1, head=2)
    n = len(TEXTS)
    (main,) = widget_data(view.figure)
    assert np.array_equal(binary(main["z"]), patterns(result)[1][2].reshape(-1))
    assert binary(main["x"], np.uint8).tolist() == list(range(n)) * n
    assert len(binary(main["y"], np.uint8)) == n * n
    grid = widget_data(view.grid)
    for h, trace in enumerate(grid):
        assert np.array_equal(binary(trace["z"]), patterns(result)[1][h].reshape(-1))
    sent, grid_sent = messages(view.figure), messages(view.grid)
    view.head = 3
    view.layer = 2
    assert [name for name, _ in sent] == ["_py2js_update", "_py2js_update"] and len(grid_sent) == 2
    # The head change moves the grid's marks only (titles and outline): no thumbnail resent.
    assert grid_sent[0][1]["style_data"] == {} and "annotations.3.text" in grid_sent[0][1]["layout_data"]
    for (_, message), pattern in zip(sent, (patterns(result)[1][3], patterns(result)[2][3]), strict=False):
        style = _py_to_js(message["style_data"], None)
        assert np.array_equal(binary(style["z"][0]), pattern.reshape(-1))
        assert "x" not in style and "y" not in style  # the positions went once
        state, buffers = wire(message)
        assert len(buffers) == 1 and memoryview(buffers[0]).nbytes == 4 * n * n
    style = _py_to_js(grid_sent[1][1]["style_data"], None)
    assert [binary(z).tolist() for z in style["z"]] == [patterns(result)[2][h].reshape(-1).tolist() for h in range(4)]
    # a new prompt whose traces are of other kinds: replaced, the new traces binary too
    long = make_result([f"t{i}" for i in range(HOVER_TEXT_MAX_TOKENS + 1)], layers=3, heads=4)
    view.update(long)
    ((name, message),) = [m for m in sent[2:] if m[0] == "_py2js_addTraces"]
    added = _py_to_js(message["trace_data"], None)
    assert np.array_equal(binary(added[0]["z"]), patterns(long)[2][3].reshape(-1))
    assert binary(added[0]["x"], np.uint16).shape == ((HOVER_TEXT_MAX_TOKENS + 1) ** 2,)


def test_logit_lens_sends_the_probabilities_as_binary():
    result = make_result()
    view = LogitLens(result)
    (trace,) = widget_data(view.figure)
    assert np.array_equal(binary(trace["z"]), result.lens.top1_probs().reshape(-1))
    sent = messages(view.figure)
    other = make_result(seed=4)
    view.update(other)
    ((name, message),) = sent
    style = _py_to_js(message["style_data"], None)
    assert np.array_equal(binary(style["z"][0]), other.lens.top1_probs().reshape(-1))


def test_widget_bytes_at_1024_tokens():
    n = 1024
    result = make_result([f"w{i % 50}" for i in range(n)], layers=2, heads=2)
    view = view_of(result)
    state, buffers = wire(widget_data(view.figure))
    assert sum(memoryview(b).nbytes for b in buffers) == n * n * (4 + 2 + 2)  # z float32, x / y uint16
    size = wire_bytes(widget_data(view.figure))
    assert size < 10_000_000, size  # ~8.4 MB (as nested JSON lists it was ~13.5 MB)
    sent = messages(view.figure)
    view.head = 1
    ((_, message),) = sent
    assert wire_bytes(message) < 4 * n * n + 10_000  # a head change sends z only
    assert wire_bytes(widget_data(view.grid)) < 200_000


# ------------------------------------------------------------------------ in a browser

CHROMIUM = Path("/usr/bin/chromium")


@pytest.mark.browser
def test_figures_in_chromium(tmp_path):
    """What plotly.js really draws: hover and tick text, escaped markup shown as text."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not found")
    sync_api = pytest.importorskip("playwright.sync_api")
    short = make_result(lens_texts=[XSS, "b"])
    long_texts = [f"t{i}" for i in range(HOVER_TEXT_MAX_TOKENS + 44)]
    long_texts[5] = XSS
    pages = {
        "short": attention_figure(panel_of(short, 0), 1, selected_token=2),
        # Drawn big enough that a cell is a few pixels, so the hover lands on the one aimed at.
        "long": attention_figure(panel_of(make_result(long_texts, layers=1, heads=1), 0), 0).update_layout(
            width=900, height=880
        ),
        "lens": lens_figure(short.lens),
    }
    for name, fig in pages.items():
        fig.write_html(tmp_path / f"{name}.html", include_plotlyjs=True, full_html=True, div_id="g")

    def hover(page, x, y):
        page.evaluate(f"Plotly.Fx.hover('g', {{xval: {x}, yval: {y}}})")
        page.wait_for_timeout(100)
        return page.evaluate("Array.from(document.querySelectorAll('.hovertext')).map(e => e.textContent)")

    def ticks(page, cls):
        return page.evaluate(f"Array.from(document.querySelectorAll('.{cls} text')).map(e => e.textContent)")

    dialogs = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox", "--headless", "--disable-gpu"]
        )
        try:
            page = browser.new_page(viewport=dict(width=900, height=800))
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            for name in pages:
                page.goto((tmp_path / f"{name}.html").as_uri())
                page.wait_for_function("document.querySelector('#g .hoverlayer') !== null")
                assert page.evaluate("document.querySelectorAll('img').length") == 0
                if name == "short":
                    (text,) = hover(page, 1, 2)
                    assert text.startswith(f"query 2: {XSS.replace(' ', '␣')}key 1: ␣the")  # <br> joins lines
                    assert "weight " in text
                    assert ticks(page, "xtick")[2] == XSS.replace(" ", "␣")
                    assert ticks(page, "ytick")[6] == "$x$" and ticks(page, "xtick")[5] == "∅"
                elif name == "long":
                    (text,) = hover(page, 5, 290)
                    assert text.startswith(f"query 290: t290key 5: {XSS.replace(' ', '␣')}")
                    shown = ticks(page, "x2tick")
                    step = math.ceil(300 / ATTENTION_TICK_LABELS)
                    assert 1 < len(shown) <= ATTENTION_TICK_LABELS and shown[2] == f"t{2 * step}"
                    assert ticks(page, "xtick") == []  # the full-label axes draw no labels
                else:
                    (text,) = hover(page, 3, 1)
                    top = lens_hover(short.lens, 1, 3)
                    assert text.startswith(f"layers[1], position 3: ␣cat{top[0][0].replace(' ', '␣')}")
                    cells = page.evaluate(
                        "Array.from(document.querySelectorAll('.heatmaplayer text')).map(e => e.textContent)"
                    )
                    assert "<img␣sr…" in cells
        finally:
            browser.close()
    assert dialogs == []


HARNESS = Path(__file__).parent / "browser" / "figure_widget_harness.html"


# Page coordinates of the centre of cell (x, y) of a FigureWidget's plot (scrolled into view).
def _d3_3g(value: float) -> str:
    """d3's ``.3~g`` (the lens's hover format) as Python writes it: three significant
    digits, trailing zeros trimmed, exponents without a leading zero."""
    return f"{value:.3g}".replace("e-0", "e-").replace("e+0", "e+")


CELL_JS = """([name, x, y, xa, ya]) => {
  const gd = document.getElementById(name);
  gd.scrollIntoView({block: 'center'});
  const a = gd._fullLayout[xa], b = gd._fullLayout[ya], r = gd.getBoundingClientRect();
  return [r.left + a._offset + a.l2p(x), r.top + b._offset + b.l2p(y)];
}"""


@pytest.mark.browser
def test_widgets_in_chromium_through_plotlys_widget_bundle(tmp_path):
    """The views as plotly's own FigureWidget front end draws them from the binary buffers.

    plotly/package_data/widgetbundle.js runs with a fake anywidget model; state and edit
    messages go the way ipywidgets sends them (``_py_to_js``, buffers cut out, put back as
    DataViews). Checked: the gridded z is the pattern and the picture is the 2-D figure's;
    hover, ticks and cell labels; a head change; clicks back to Python.
    """
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not found")
    sync_api = pytest.importorskip("playwright.sync_api")
    import base64
    import functools
    import http.server
    import shutil
    import threading

    import plotly
    from plotly.serializers import _js_to_py

    shutil.copy(HARNESS, tmp_path / "harness.html")
    shutil.copy(Path(plotly.__file__).parent / "package_data" / "widgetbundle.js", tmp_path / "widgetbundle.js")

    def on_wire(state):
        state, paths, buffers = _remove_buffers(state)
        return [state, [list(p) for p in paths], [base64.b64encode(bytes(b)).decode() for b in buffers]]

    short = make_result(lens_texts=[XSS, "b"])
    view = view_of(short, layer=0, head=1)
    view.selected_token = 2
    long_texts = [f"t{i}" for i in range(HOVER_TEXT_MAX_TOKENS + 44)]
    long_texts[5] = XSS
    long = view_of(make_result(long_texts, layers=1, heads=2))
    # Big enough that a cell is a few pixels: the mouse lands on the one it aims at.
    long.figure.layout.height = 880
    long.figure.layout.width = 900
    lens = LogitLens(short)
    widgets = {
        "att": view.figure,
        "grid": view.grid,
        "long": long.figure,
        "lens": lens.figure,
        # the same figures as 2-D z (nested JSON lists), to compare the pictures
        "att2d": go.FigureWidget(attention_figure(panel_of(short, 0), 1, 2)),
        "lens2d": go.FigureWidget(lens_figure(short.lens)),
        # a long prompt's pattern as shipped: block maxima, in column form
        "pooled": go.FigureWidget(for_widget(attention_figure(_pooled(panel_of(short, 1), 3), 2))),
    }

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(tmp_path)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    errors, dialogs = [], []
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=str(CHROMIUM), args=["--no-sandbox", "--headless", "--disable-gpu"]
            )
            try:
                page = browser.new_page(viewport=dict(width=1000, height=900))
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
                page.goto(f"http://127.0.0.1:{server.server_address[1]}/harness.html")
                page.wait_for_function("window.__ready === true")
                for name, widget in widgets.items():
                    widget._repr_mimebundle_()
                    page.evaluate("([n, s, p, b]) => window.boot(n, s, p, b)", [name, *on_wire(widget.get_state())])
                    page.wait_for_function(f"document.querySelector('#{name} .hm image') !== null")

                def hover(name, x, y, xa="xaxis", ya="yaxis"):
                    page.mouse.move(0, 0)
                    page.wait_for_timeout(50)
                    page.mouse.move(*page.evaluate(CELL_JS, [name, x, y, xa, ya]))
                    page.wait_for_timeout(150)
                    return page.evaluate(
                        f"Array.from(document.querySelectorAll('#{name} .hovertext')).map(e => e.textContent)"
                    )

                def grid_z(name, trace=0):
                    return np.array(
                        page.evaluate(
                            f"Array.from(document.getElementById('{name}').calcdata[{trace}][0].z, r => Array.from(r))"
                        ),
                        dtype=np.float32,
                    )

                def texts(selector):
                    return page.evaluate(f"Array.from(document.querySelectorAll('{selector}')).map(e => e.textContent)")

                def image(name):
                    return page.evaluate(f"document.querySelector('#{name} .hm image').getAttribute('href')")

                # the numbers arrived as typed arrays and plotly.js gridded them into the pattern
                assert page.evaluate("document.getElementById('att').data[0].z instanceof Float32Array")
                assert page.evaluate("document.getElementById('att').data[0].x instanceof Uint8Array")
                assert np.array_equal(grid_z("att"), patterns(short)[0][1])
                assert np.array_equal(grid_z("lens"), short.lens.top1_probs())
                assert np.array_equal(grid_z("grid", 3), patterns(short)[0][3])
                assert image("att") == image("att2d") and image("lens") == image("lens2d")  # the same picture
                assert page.evaluate("document.getElementById('att')._fullLayout.yaxis.range[0] > 0")  # reversed
                shown = [html.unescape(escape_token(t)) for t in TEXTS]  # plotly decodes the entities
                assert texts("#att .xtick text") == texts("#att .ytick text") == shown
                # hover: query and key token, weight
                (text,) = hover("att", 1, 2)
                assert text == f"query 2: {XSS.replace(' ', '␣')}key 1: ␣theweight {patterns(short)[0][1][2, 1]:.4f}"
                assert hover("att2d", 1, 2) == [text]
                (text,) = hover("long", 5, 290)
                assert text.startswith(f"query 290: t290key 5: {XSS.replace(' ', '␣')}weight ")
                shown = texts("#long .x2tick text")
                assert 1 < len(shown) <= ATTENTION_TICK_LABELS
                assert texts("#long .xtick text") == []
                # a pooled cell's hover: the token ranges it is the maximum over
                (text,) = hover("pooled", 1, 2)
                weight = _pooled(panel_of(short, 1), 3).head(2)[2, 1]
                empty = html.unescape(escape_token(TEXTS[5]))  # shown as a sign, not as nothing
                assert (
                    text
                    == f"max over queries 6..7 ($x$ … ␣the)keys 3..5 (␣cat … {empty})weight {weight:.4f}click to zoom"
                )
                (text,) = hover("lens", 3, 1)
                top = lens_hover(short.lens, 1, 3)
                assert text == "layers[1], position 3: ␣cat" + "".join(
                    f"{t.replace(' ', '␣')}  {_d3_3g(p)}" for t, p in top
                )
                assert texts("#lens .heatmaplayer text") == texts("#lens2d .heatmaplayer text")
                assert "<img␣sr…" in texts("#lens .heatmaplayer text")
                (text,) = hover("grid", 3, 5, "xaxis2", "yaxis2")
                assert text == f"head 1weight {patterns(short)[0][1][5, 3]:.3f}"
                # a head change: the update message (z as one buffer) redraws the same widget
                sent = messages(view.figure)
                view.head = 3
                for key, message in sent:
                    state, paths, buffers = on_wire({key: _py_to_js(message, None)})
                    assert len(buffers) == 1
                    page.evaluate(
                        "([n, k, s, p, b]) => window.pySet(n, k, s[k], p.map(q => q.slice(1)), b)",
                        ["att", key, state, paths, buffers],
                    )  # paths start with the key
                page.wait_for_timeout(200)
                assert np.array_equal(grid_z("att"), patterns(short)[0][3])
                assert hover("att", 1, 2)[0].endswith(f"weight {patterns(short)[0][3][2, 1]:.4f}")
                # clicks come back to Python as positions: a cell of the head selects its query,
                # a cell of the grid selects its head
                for name, (x, y, xa, ya), widget in (
                    ("att", (4, 6, "xaxis", "yaxis"), view.figure),
                    ("grid", (3, 3, "xaxis3", "yaxis3"), view.grid),
                ):
                    page.mouse.click(*page.evaluate(CELL_JS, [name, x, y, xa, ya]))
                    page.wait_for_timeout(200)
                    saves = page.evaluate(f"window.views.{name}.model.saves.filter(s => s._js2py_pointsCallback)")
                    points = saves[-1]["_js2py_pointsCallback"]
                    assert (points["points"]["xs"], points["points"]["ys"]) == ([x], [y])
                    widget._js2py_pointsCallback = _js_to_py(points, None)
                assert view.selected_token == 6 and view.head == 2
                assert page.evaluate("document.querySelectorAll('img').length") == 0
            finally:
                browser.close()
    finally:
        server.shutdown()
    assert errors == [] and dialogs == []


def test_panels_follow_the_page_theme():
    """The module tree reports the page's theme; the plotly panels switch template."""
    import plotly.io as pio

    from nnterp_widgets.widgets.lens import LogitLens

    result = make_result()
    lens = LogitLens(result)
    light = lens.figure.layout.template.layout.paper_bgcolor
    lens.theme = "dark"
    assert lens.figure.layout.template.layout.paper_bgcolor == pio.templates["plotly_dark"].layout.paper_bgcolor
    assert lens.figure.layout.template.layout.paper_bgcolor != light
    lens.update(result)  # a new prompt keeps the theme
    assert lens.figure.layout.template.layout.paper_bgcolor == pio.templates["plotly_dark"].layout.paper_bgcolor


def _attribution(heads_reason=None):
    from nnterp_widgets.requests.attribution import Attribution
    from nnterp_widgets.requests.common import Tokens

    heads = np.arange(6, dtype=np.float64).reshape(2, 3) - 2.5
    if heads_reason:
        heads = np.full((2, 3), np.nan)
    return Attribution(
        prompt="a <b>",
        tokens=Tokens((1, 2), ("a", " <b>")),
        answer=5,
        answer_text=" <b>",
        foil=6,
        foil_text=" Rome",
        metric=1.5,
        heads=heads,
        attention_bias=np.array([0.1, -0.1]),
        attention=np.array([0.0, 1.0]),
        mlps=np.array([0.2, 0.3]),
        embedding=0.1,
        norm_bias=0.0,
        head_bias=0.0,
        heads_reason=heads_reason,
    )


def test_attribution_figure_maps_heads_and_blocks_on_one_scale():
    from nnterp_widgets.figures.attribution import attribution_figure

    attribution = _attribution()
    fig = attribution_figure(attribution, selected=(1, 2))
    heads, blocks = fig.data
    np.testing.assert_array_equal(np.asarray(heads.z), attribution.heads)
    np.testing.assert_array_equal(np.asarray(blocks.z)[:, 0], attribution.mlps)
    assert heads.zmin == blocks.zmin == -2.5 and heads.zmax == blocks.zmax == 2.5 and heads.zmid == 0
    assert "<b>" not in fig.layout.title.text  # the answer's text is escaped
    assert [(s.x0, s.y0) for s in fig.layout.shapes] == [(1.5, 0.5)]
    assert sorted(attribution.top_heads(2)) == [((0, 0), -2.5), ((1, 2), 2.5)]  # by size
    assert attribution.top_heads(1, sign=1) == [((1, 2), 2.5)]
    assert attribution.top_heads(1, sign=-1) == [((0, 0), -2.5)]


def test_attribution_figure_says_why_heads_are_not_split():
    from nnterp_widgets.figures.attribution import attribution_figure

    fig = attribution_figure(_attribution("post-norm heads"))
    assert any("post-norm heads" in a.text for a in fig.layout.annotations)
    assert _attribution("x").top_heads() == []


def test_continuations_are_text_aligned_and_marked_where_they_differ():
    from types import SimpleNamespace

    from nnterp_widgets.requests.common import Tokens
    from nnterp_widgets.figures.causal import DIFFERS, continuations_html

    def gen(texts):
        return SimpleNamespace(generated=Tokens(tuple(range(len(texts))), tuple(texts)))

    result = SimpleNamespace(layer=1, coefficient=2.0, steered=gen([" a", "<b>", " c"]), plain=gen([" a", " b", " c"]))
    page = continuations_html(result)
    assert "<b>" not in page and "&lt;b&gt;" in page  # markup in a token is text
    assert page.count(DIFFERS) == 2 + 1  # the differing cell in each row, and the style rule
    assert "␣a" in page


def test_occlusion_figure_is_the_delta_row_with_escaped_labels():
    from nnterp_widgets.interventions.occlusion import Occlusion
    from nnterp_widgets.requests.common import Tokens
    from nnterp_widgets.figures.causal import occlusion_figure

    occlusion = Occlusion(
        prompt="a <b> c",
        tokens=Tokens((1, 2, 3), ("a", " <b>", " c")),
        answer=5,
        answer_text=" x",
        mode="replace",
        neutral=9,
        neutral_text=" ",
        clean_logit=2.0,
        clean_prob=0.5,
        logits=np.array([1.0, 2.5, 2.0]),
        probs=np.array([0.25, 0.6, 0.5]),
        requests=1,
    )
    fig = occlusion_figure(occlusion)
    np.testing.assert_array_equal(np.asarray(fig.data[0].z)[0], [-1.0, 0.5, 0.0])
    assert fig.data[0].zmin == -1.0 and fig.data[0].zmax == 1.0
    assert all("<b>" not in t for t in fig.layout.xaxis.ticktext)
    assert occlusion.most_needed(1) == [(0, "a", -1.0)]
    np.testing.assert_allclose(
        np.asarray(occlusion_figure(occlusion, "probability").data[0].z)[0], [-0.25, 0.1, 0.0], atol=1e-12
    )


def _contributions(through=None):
    from nnterp_widgets.requests.contributions import Contributions
    from nnterp_widgets.requests.common import Tokens

    # Two layers, three tokens; attention shares from FLOOR up, as the engine returns them.
    edges = np.array([[1, 2, 0], [1, 2, 1], [0, 0, 0], [0, 1, 0]], dtype=np.int32)
    shares = np.array([0.3, 0.02, 0.5, 0.2], dtype=np.float32)
    residual = np.array([[0.5, 0.8, 0.9], [0.9, 0.9, 0.6]])
    through = np.full((2, 3), 0.9) if through is None else through
    return Contributions(
        prompt="<b> b c",
        tokens=Tokens((1, 2, 3), ("<b>", " b", " c")),
        edges=edges,
        shares=shares,
        residual=residual,
        bias=np.zeros((2, 3)),
        through=through,
        mlp=1 - through,
    )


def test_the_graph_keeps_the_routes_to_the_target_above_the_threshold():
    graph = _contributions()
    route = graph.graph(0.04)
    assert route.nodes == ((2, 2), (1, 0), (1, 2), (0, 0), (0, 2))
    assert {(l, s, t, kind) for l, s, t, _, kind in route.edges} == {
        (1, 2, 2, "residual"),
        (1, 0, 2, "attention"),
        (0, 0, 0, "residual"),
        (0, 0, 0, "attention"),
        (0, 2, 2, "residual"),
    }
    assert route.sources(1, 2) == [0]  # the 0.02 edge from ' b' is under the threshold
    assert graph.graph(0.01).sources(1, 2) == [0, 1]
    np.testing.assert_allclose(graph.attention_share(1, -1), [0.3, 0.02, 0.0], rtol=1e-6)
    # A higher threshold drops the weaker edges; the residual of 0.6 still carries the target.
    assert graph.graph(0.55).edges == ((1, 2, 2, 0.6, "residual"), (0, 2, 2, 0.9, "residual"))
    # Where neither of the MLP step's parts reaches the threshold nothing below is kept.
    through = np.full((2, 3), 0.9)
    through[1, 2] = 0.5  # and the MLP's share 0.5
    quiet = _contributions(through)
    assert quiet.graph(0.55).nodes == ((2, 2),)
    # Bad input says what is accepted.
    for bad in (0.0, 1.5, "0.1", True):
        with pytest.raises(ValueError, match="threshold"):
            graph.graph(bad)
    for bad in (3, -4, 1.0):
        with pytest.raises(ValueError, match="the prompt has 3 tokens"):
            graph.graph(0.04, bad)


def test_the_contribution_figure_draws_the_kept_edges_with_escaped_labels():
    from nnterp_widgets.figures.contributions import contribution_figure, route_picture

    picture = route_picture(_contributions(), 0.04)
    assert len(picture.edges) == 5
    fig = contribution_figure(picture)
    nodes = fig.data[-1]
    assert list(zip(nodes.x, nodes.y, strict=True)) == [(2, 2), (0, 1), (2, 1), (0, 0), (2, 0)]
    hover = fig.data[-2]
    assert len(hover.hovertext) == 5
    assert any("layers[1] attention: &lt;b&gt;·0 → ␣c·2" in text and "30.0%" in text for text in hover.hovertext)
    assert "<b>" not in " ".join(fig.layout.xaxis.ticktext)
    lines = [t for t in fig.data if t.mode == "lines"]
    assert sum(list(t.x).count(None) for t in lines) == 5  # one segment per kept edge
    assert "5 edges" in fig.layout.title.text


def test_positions_off_the_routes_fold_into_one_column_a_run():
    from nnterp_widgets.figures.contributions import MOST_LABELS, fold_columns

    columns, folds = fold_columns(10, [2, 3, 9, 3])
    assert columns == (0, 0, 1, 2, 3, 3, 3, 3, 3, 4)  # 0-1 and 4-8 each one "…" column
    assert folds == ((0, "…2"), (3, "…5"))
    assert fold_columns(3, [0, 1, 2]) == ((0, 1, 2), ())
    assert fold_columns(4, [3]) == ((0, 0, 0, 1), ((0, "…3"),))
    # A long prompt whose routes touch a few tokens draws a few columns, every one labelled.
    long = fold_columns(2048, list(range(0, 2048, 128)) + [2047])
    assert max(long[0]) + 1 == 17 + 16 and MOST_LABELS >= 17


def test_the_graph_of_a_long_prompt_draws_its_routes_at_a_readable_width():
    from nnterp_widgets.figures.contributions import contribution_figure, route_picture
    from nnterp_widgets.requests.contributions import Contributions

    count = 400
    edges = np.array([[1, count - 1, 7], [0, 7, 120]], dtype=np.int32)
    shares = np.array([0.5, 0.4], dtype=np.float32)
    residual = np.full((2, count), 0.5)
    graph = Contributions(
        prompt="x",
        tokens=Tokens(tuple(range(count)), tuple(f"w{i}" for i in range(count))),
        edges=edges,
        shares=shares,
        residual=residual,
        bias=np.zeros((2, count)),
        through=np.full((2, count), 0.9),
        mlp=np.full((2, count), 0.1),
    )
    picture = route_picture(graph, 0.3)
    on_route = sorted({p for _, p in graph.graph(0.3).nodes})
    assert on_route == [7, 120, count - 1]
    assert picture.width == 2 * len(on_route)  # a fold before each kept position
    fig = contribution_figure(picture)
    assert list(fig.layout.xaxis.ticktext) == ["…7", "w7·7", "…112", "w120·120", "…278", f"w{count - 1}·{count - 1}"]
    assert fig.layout.xaxis.range == (-0.5, picture.width - 0.5)
    assert fig.layout.dragmode == "zoom" and not fig.layout.xaxis.fixedrange and not fig.layout.yaxis.fixedrange
    assert picture.summary in fig.layout.title.text and picture.summary.startswith(
        f"{len(picture.edges)} edges (2 attention)"
    )


def test_a_wide_lens_takes_the_output_areas_width_and_shorter_labels():
    from nnterp_widgets.figures.lens import LENS_FIXED_MAX, cell_chars, lens_width

    assert lens_width(8) < LENS_FIXED_MAX  # room for each label
    assert lens_width(32) == LENS_FIXED_MAX  # within a notebook's output area: no sideways scroll
    assert cell_chars(8) == CELL_TEXT_CHARS and 3 <= cell_chars(32) < CELL_TEXT_CHARS
    result = make_result(lens_texts=["Paris", " Eiffel", XSS, "\n"], k=2)
    fig = lens_figure(result.lens)
    assert fig.layout.width == lens_width(len(result.lens.positions))


def _row(panel: AttentionPattern, query: int) -> AttentionPattern:
    """Query ``query``'s exact row over every key, as `Session.attention_row` ships it."""
    cells = np.ascontiguousarray(panel.quantized[:, query : query + 1, :])
    return AttentionPattern(
        panel.tokens, panel.layer, panel.num_layers, cells, cells.astype(np.float32) / QUANT, 1, query, 0
    )


def test_the_token_view_ships_each_querys_row_and_its_scale_with_the_sink_set_apart():
    from nnterp_widgets.widgets.attention_text import text_view_state
    from nnterp_widgets.figures.attention import SCALE_FLOOR
    from nnterp_widgets.figures.tokens import show_token

    result = make_result()
    panel = panel_of(result, 1)
    state = text_view_state(panel, 2)
    count = len(TEXTS)
    assert state.tokens == tuple(show_token(text) for text in panel.tokens.texts)
    assert state.rows == tuple(range(count))  # a short prompt: every row, so a hover asks nothing
    assert len(state.weights) == count * count and len(state.scales) == 4 * count
    assert state.caption == "layers[1] head 2"
    for query in range(count):
        row = panel.head(2)[query]
        np.testing.assert_allclose(state.row(query), row, atol=1 / 255)  # one byte a cell
        # the colour scale's top: the largest weight off the first token (which saturates)
        off_first = row[1 : query + 1].max() if query else row[0]
        assert state.scale(query) == pytest.approx(min(1.0, max(SCALE_FLOOR, off_first)), abs=1e-6)
    assert text_view_state(panel, 0).weights != state.weights  # another head, other rows
    # Pooled (a long prompt): the tokens alone, then the selected query's row once it came.
    pooled = _pooled(panel, 3)
    bare = text_view_state(pooled, 0)
    assert bare.tokens == state.tokens and bare.rows == () and bare.weights == b"" and bare.scales == b""
    one = text_view_state(pooled, 2, _row(panel, 5))
    assert one.rows == (5,) and len(one.weights) == count
    np.testing.assert_allclose(one.row(5), state.row(5))
    assert one.scale(5) == state.scale(5)
    assert text_view_state(pooled, 2, _row(panel_of(result, 0), 5)).rows == ()  # another layer's row: not shown
    with pytest.raises(IndexError, match="out of range"):
        text_view_state(panel, panel.num_heads)


def test_the_layer_and_head_boxes_take_whole_numbers_and_say_why_not():
    result = make_result()
    view = view_of(result, layer=1, head=2)
    view.head_input.value = "1.5"  # a number box would have made this 15
    assert view.head == 2 and view.head_input.value == "2" and "'1.5': type a whole number" in view.message.value
    view.head_input.value = " 3 "
    assert view.head == 3 and view.head_input.value == "3"
    view.layer_input.value = "9"  # out of range: refused, the box put back
    assert view.layer == 1 and view.layer_input.value == "1" and "out of range" in view.message.value
    view.layer_input.value = "2"
    assert view.layer == 2


def test_every_widget_figure_and_the_export_take_the_short_tool_bar():
    from nnterp_widgets import AttentionView, LogitLens
    from nnterp_widgets.widgets.export import export_html
    from nnterp_widgets.figures.common import PLOTLY_CONFIG
    from test_export import _figures, synthetic_result, synthetic_tree

    attention, lens = AttentionView(), LogitLens()
    try:
        for figure in (attention.figure, lens.figure):
            assert figure._config == PLOTLY_CONFIG  # read by plotly.js when first drawn
        assert attention.grid._config == {**PLOTLY_CONFIG, "displayModeBar": False}  # a picker
    finally:
        attention.close()
        lens.close()
    assert "zoom2d" not in PLOTLY_CONFIG["modeBarButtonsToRemove"]  # the tools these figures use stay
    page = export_html(synthetic_result(), synthetic_tree())
    for figure in _figures(page).values():
        assert figure["config"]["modeBarButtonsToRemove"] == PLOTLY_CONFIG["modeBarButtonsToRemove"]
        assert figure["config"]["displaylogo"] is False


def test_the_head_grid_keeps_to_three_rows_however_many_heads():
    from nnterp_widgets.figures.attention import ABLATED_MARK, GRID_ROWS, GRID_WIDTH, SHOWN_MARK, grid_shape

    assert [grid_shape(h) for h in (1, 2, 4, 9, 12, 14, 32, 64)] == [
        (1, 1),
        (1, 2),
        (1, 4),
        (2, 5),  # the trained model: two rows, so the grid and the token view stay as short as the heatmap
        (3, 5),
        (3, 5),
        (3, 11),
        (3, 22),
    ]
    tall = head_grid_figure(panel_of(make_result(heads=32), 0), shown=3, ablated=(5,))
    nine = head_grid_figure(panel_of(make_result(heads=9), 0), shown=3, ablated=(5,))
    four = head_grid_figure(panel_of(make_result(heads=4), 0), shown=3, ablated=(1,))
    for fig, heads, rows in ((tall, 32, GRID_ROWS), (nine, 9, 2)):
        assert len(fig.data) == heads and fig.layout.width == GRID_WIDTH
        axes = {trace.yaxis for trace in fig.data}
        assert len({fig.layout[axis.replace("y", "yaxis")].domain for axis in axes}) == rows
    assert tall.layout.height < nine.layout.height  # narrower columns, square cells: shorter rows
    titles = [a.text for a in tall.layout.annotations if a.text != tall.layout.title.text]
    assert titles[3] == f"{SHOWN_MARK}3" and titles[31] == "31"  # a number alone in a narrow column
    assert titles[5] == "5 ✕" and "(ablated)" in tall.data[5].hovertemplate  # short mark; the hover says it
    assert "(ablated)" not in tall.data[4].hovertemplate
    assert [a.text for a in nine.layout.annotations][3] == f"{SHOWN_MARK}3"  # five columns: numbers
    named = [a.text for a in four.layout.annotations]
    assert named[3] == f"{SHOWN_MARK}head 3" and named[1] == f"head 1{ABLATED_MARK}"  # room for names


def test_attribution_names_its_largest_heads_and_mlps_with_their_sign():
    attribution = _attribution()  # heads -2.5 .. 2.5 over 2 x 3, MLPs 0.2 and 0.3
    assert attribution.top_heads(2) == [((0, 0), -2.5), ((1, 2), 2.5)]  # by size, the sign kept
    assert attribution.top_heads(1, sign=1) == [((1, 2), 2.5)]
    assert attribution.top_heads(1, sign=-1) == [((0, 0), -2.5)]
    assert attribution.top_mlps(2) == [(1, 0.3), (0, 0.2)]
    assert attribution.top_mlps(1, sign=-1) == [(0, 0.2)]  # the least positive is the most negative here
