"""The static HTML export (nnterp_widgets/widgets/export.py) on a synthetic prompt.

No engine: a hand-built PromptResult and tree. The page must be self-contained (plotly.js
inline, no script from the network), hold the figures' data exactly, and show a markup
token only escaped, in the tree, the chips and the figures alike. The browser test
(tests/browser/test_jupyterlab_tour.py) opens a real export offline in Chromium.
"""

from __future__ import annotations

import base64
import html
import json
import re

import numpy as np
import pytest

from nnterp_widgets.session.panels import LensPanel, PromptResult, Tokens
from nnterp_widgets.widgets.export import export_html, figure_json, tree_html

XSS = "<img src=x onerror=alert(1)>"
TEXTS = ("Paris", " " + XSS, " is", "\n", " ")
REASON = 'a gated MLP on vLLM: act(gate) is "never" <a module\'s> output & more'
LAYERS, HEADS, K = 2, 2, 3


def synthetic_result() -> PromptResult:
    tokens = Tokens(ids=tuple(range(len(TEXTS))), texts=TEXTS)
    n = len(TEXTS)
    rng = np.random.default_rng(0)
    probs = np.sort(rng.random((LAYERS, n, K), dtype=np.float32), axis=-1)[..., ::-1].copy()
    top_texts = tuple(tuple(tuple(f"t{l}{p}{i}" if (l, p, i) != (1, 1, 0) else XSS for i in range(K))
                            for p in range(n)) for l in range(LAYERS))
    lens = LensPanel(tokens=tokens, top_ids=np.zeros((LAYERS, n, K), np.int64), top_probs=probs,
                     top_texts=top_texts, model_top_ids=np.zeros(K, np.int64), model_top_probs=probs[-1, -1])
    patterns = {}
    for layer in range(LAYERS):
        raw = np.tril(rng.random((HEADS, n, n), dtype=np.float32)) + np.eye(n, dtype=np.float32)
        patterns[layer] = (raw / raw.sum(-1, keepdims=True)).astype(np.float32)
    return PromptResult(prompt="Paris " + XSS + " is\n", tokens=tokens, lens=lens, patterns=patterns)


def synthetic_tree() -> list[dict]:
    def value(node, name, available=True, reason=None, shape=(1, 4, 8)):
        return {"id": f"{node}.{name}", "name": name, "available": available, "reason": reason,
                "shape": list(shape) if available else None, "dtype": "float32" if available else None,
                "writable": False}

    def layer(i):
        base = f"model.model.layers.{i}"
        return {"id": base, "name": f"layers[{i}]", "native": str(i), "type": "Qwen2DecoderLayer", "standard": True,
                "repeat": {"group": "model.model.layers", "index": i, "count": 2},
                "values": [value(base, "layer_output")],
                "children": [{"id": f"{base}.mlp", "name": f"layers[{i}].mlp", "native": "mlp", "type": "Qwen2<b>MLP</b>",
                              "standard": True, "repeat": None,
                              "values": [value(f"{base}.mlp", "mlp_activation", False, REASON),
                                         value(f"{base}.mlp", "mlp_output")],
                              "children": [{"id": f"{base}.mlp.down_proj", "name": "down_proj", "native": "down_proj",
                                            "type": "RowParallelLinear", "standard": False, "repeat": None,
                                            "values": [], "children": []}]}]}

    return [{"id": "model", "name": "model", "native": "model", "type": "Qwen2ForCausalLM", "standard": True,
             "repeat": None, "values": [value("model", "logits", shape=(1, 4, 64))],
             "children": [{"id": "model.model", "name": "model.model", "native": "model", "type": "Qwen2Model",
                           "standard": False, "repeat": None, "values": [],
                           "children": [layer(0), layer(1)]}]}]


@pytest.fixture(scope="module")
def page():
    return export_html(synthetic_result(), synthetic_tree(), layer=1, head=1, selected_token=1)


def _markup(text: str) -> tuple[set, set]:
    """The tag names and attribute names in ``text``."""
    from html.parser import HTMLParser

    tags, attrs = set(), set()

    class Collect(HTMLParser):
        def handle_starttag(self, tag, attributes):
            tags.add(tag)
            attrs.update(name for name, _ in attributes)

    Collect().feed(text)
    return tags, attrs


def _figures(text: str) -> dict:
    blocks = re.findall(r'<script type="application/json" data-figure="([^"]+)">(.*?)</script>', text, re.S)
    return {key: json.loads(body) for key, body in blocks}


def _decode(array):
    """A plotly JSON array: a list, or plotly 7's base64 typed array."""
    if isinstance(array, dict) and "bdata" in array:
        data = np.frombuffer(base64.b64decode(array["bdata"]), dtype=np.dtype(array["dtype"]).newbyteorder("<"))
        if "shape" in array:
            data = data.reshape([int(s) for s in str(array["shape"]).split(",")])
        return data
    return np.asarray(array)


def test_self_contained(page):
    scripts = re.findall(r"<script\b[^>]*>", page, re.I)
    assert scripts, "no script at all"
    assert not any("src=" in tag.lower() for tag in scripts), scripts  # everything inline
    assert not re.search(r"""<(script|link|img|iframe)[^>]+(src|href)\s*=\s*["']?(https?:)?//""", page, re.I)
    assert "<link" not in page.lower()
    assert "Plotly.newPlot" in page and len(page) > 1_000_000  # plotly.js itself is inside
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")


def test_markup_only_escaped(page):
    assert XSS not in page
    assert "<img" not in page.lower()
    assert "<b>MLP</b>" not in page
    assert html.escape(XSS) in page  # the tree chips / title show it as text
    assert "Qwen2&lt;b&gt;MLP&lt;/b&gt;" in page
    # the figures' JSON carries it escaped once (plotly decodes the entities when it draws)
    figures = _figures(page)
    ticks = figures["nnw-attention"]["layout"]["xaxis"]["ticktext"]
    assert ticks[1] == "␣&lt;img␣src=x␣onerror=alert(1)&gt;"
    assert figures["nnw-lens"]["data"][0]["customdata"][1][1][2] == "&lt;img␣src=x␣onerror=alert(1)&gt;"


def test_tree_is_static_text_with_shapes_and_reasons(page):
    body = tree_html(synthetic_tree())
    tags, attrs = _markup(body)
    assert tags <= {"div", "details", "summary", "span", "ul", "li", "p"}, tags
    assert not any(name.startswith("on") for name in attrs), attrs  # no handlers
    assert 'title="' + html.escape(REASON, quote=True) + '"' in body
    assert "unavailable: " + html.escape(REASON, quote=True) in body
    assert "[1, 4, 8]" in body and "[1, 4, 64]" in body
    assert ">layers[0]<" in body and ">layers[1]<" in body
    assert '<details open data-id="model.model.layers.0">' in body
    assert '<details data-id="model.model.layers.1">' in body  # later repeats start folded
    assert '<div class="leaf" data-id="model.model.layers.0.mlp.down_proj">' in body  # nothing to unfold
    assert body in page


def test_figures_hold_the_data(page):
    result = synthetic_result()
    figures = _figures(page)
    assert set(figures) == {"nnw-attention", "nnw-lens"}
    attention = figures["nnw-attention"]["data"][0]
    assert attention["type"] == "heatmap"
    np.testing.assert_array_equal(_decode(attention["z"]), result.patterns[1][1])
    assert figures["nnw-attention"]["layout"]["title"]["text"] == "layers[1] head 1"
    assert len(figures["nnw-attention"]["layout"]["shapes"]) == 2  # selected row and column
    lens = figures["nnw-lens"]["data"][0]
    np.testing.assert_array_equal(_decode(lens["z"]), result.lens.top1_probs())
    assert [f'id="{key}"' in page for key in figures] == [True, True]
    # the chips: selected token marked, whitespace made visible, markup as text
    chips = re.findall(r'<span class="chip( selected)?" title="token (\d+)">(.*?)</span>', page)
    assert [(bool(s), int(i), t) for s, i, t in chips] == [
        (False, 0, "Paris"), (True, 1, " " + html.escape(XSS)), (False, 2, " is"), (False, 3, "↵"), (False, 4, "␣")]


def test_figure_json_cannot_close_its_script():
    import plotly.graph_objects as go

    text = figure_json(go.Figure(layout=dict(title=dict(text="</script><script>alert(1)</script>&"))))
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text)["layout"]["title"]["text"] == "</script><script>alert(1)</script>&"


def test_write_to_path(tmp_path):
    path = tmp_path / "view.html"
    text = export_html(synthetic_result(), synthetic_tree(), path=path)
    assert path.read_text(encoding="utf-8") == text


def test_bad_layer_is_refused():
    with pytest.raises(IndexError, match="layer 7"):
        export_html(synthetic_result(), synthetic_tree(), layer=7)
