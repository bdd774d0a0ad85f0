"""The static HTML export (nnterp_widgets/widgets/export.py) on a synthetic prompt.

No engine: a hand-built PromptResult and tree. The page must be self-contained (plotly.js
inline, no script from the network), run the widget's own JS on the tree's state, hold the
figures' data exactly, and carry markup only as data. tests/browser/test_export_page.py
opens it offline in Chromium; the tour's browser test opens a real one.
"""

from __future__ import annotations

import base64
import html
import json
import re

import numpy as np
import pytest

from nnterp_widgets.requests.attention import AttentionPattern
from nnterp_widgets.requests.lens import LensGrid
from nnterp_widgets.requests.prompt import PromptResult
from nnterp_widgets.requests.common import Tokens
from nnterp_widgets.widgets.assets import (
    ATTENTION_TOKENS_ESM,
    MODULE_TREE_CSS,
    MODULE_TREE_ESM,
    TOKEN_CHIPS_CSS,
    module_text,
)
from nnterp_widgets.widgets.attention_text import TOKEN_VIEW_STYLE, text_view_state
from nnterp_widgets.figures.html import script_json
from nnterp_widgets.widgets.export import STATIC_MODEL_JS, export_html
from nnterp_widgets.figures.common import escape_token

XSS = "<img src=x onerror=alert(1)>"
TEXTS = ("Paris", " " + XSS, " is", "\n", " ")
REASON = 'a gated MLP on vLLM: act(gate) is "never" <a module\'s> output & more'
LAYERS, HEADS, K = 2, 2, 3


def synthetic_result(texts: tuple[str, ...] = TEXTS) -> PromptResult:
    tokens = Tokens(ids=tuple(range(len(texts))), texts=tuple(texts))
    n = len(texts)
    rng = np.random.default_rng(0)
    probs = np.sort(rng.random((LAYERS, n, K), dtype=np.float32), axis=-1)[..., ::-1].copy()
    top_texts = tuple(
        tuple(tuple(f"t{l}{p}{i}" if (l, p, i) != (1, 1, 0) else XSS for i in range(K)) for p in range(n))
        for l in range(LAYERS)
    )
    lens = LensGrid(
        tokens=tokens,
        top_ids=np.zeros((LAYERS, n, K), np.int64),
        top_probs=probs,
        top_texts=top_texts,
        model_top_ids=np.zeros(K, np.int64),
        model_top_probs=probs[-1, -1],
    )
    panels = {}
    for layer in range(LAYERS):
        raw = np.tril(rng.random((HEADS, n, n), dtype=np.float32)) + np.eye(n, dtype=np.float32)
        panels[layer] = AttentionPattern.from_probabilities(tokens, layer, LAYERS, raw / raw.sum(-1, keepdims=True))
    # The view shows layer 1 (a layer switch's panel, as the explorer hands it over).
    return PromptResult(
        prompt="".join(texts), tokens=tokens, lens=lens, attention=panels[1], pattern_layers=tuple(panels)
    )


def synthetic_tree() -> list[dict]:
    def value(node, name, available=True, reason=None, shape=(1, 4, 8)):
        return {
            "id": f"{node}.{name}",
            "name": name,
            "available": available,
            "reason": reason,
            "shape": list(shape) if available else None,
            "dtype": "float32" if available else None,
            "writable": False,
        }

    def layer(i):
        base = f"model.model.layers.{i}"
        return {
            "id": base,
            "name": f"layers[{i}]",
            "native": str(i),
            "type": "Qwen2DecoderLayer",
            "standard": True,
            "repeat": {"group": "model.model.layers", "index": i, "count": 2},
            "values": [value(base, "layer_output")],
            "children": [
                {
                    "id": f"{base}.mlp",
                    "name": f"layers[{i}].mlp",
                    "native": "mlp",
                    "type": "Qwen2<b>MLP</b>",
                    "standard": True,
                    "repeat": None,
                    "values": [
                        value(f"{base}.mlp", "mlp_activation", False, REASON),
                        value(f"{base}.mlp", "mlp_output"),
                    ],
                    "children": [
                        {
                            "id": f"{base}.mlp.down_proj",
                            "name": "down_proj",
                            "native": "down_proj",
                            "type": "RowParallelLinear",
                            "standard": False,
                            "repeat": None,
                            "values": [],
                            "children": [],
                        }
                    ],
                }
            ],
        }

    return [
        {
            "id": "model",
            "name": "model",
            "native": "model",
            "type": "Qwen2ForCausalLM",
            "standard": True,
            "repeat": None,
            "values": [value("model", "logits", shape=(1, 4, 64))],
            "children": [
                {
                    "id": "model.model",
                    "name": "model.model",
                    "native": "model",
                    "type": "Qwen2Model",
                    "standard": False,
                    "repeat": None,
                    "values": [],
                    "children": [layer(0), layer(1)],
                }
            ],
        }
    ]


@pytest.fixture(scope="module")
def page():
    return export_html(synthetic_result(), synthetic_tree(), layer=1, head=1, selected_token=1)


def _model(text: str) -> dict:
    (block,) = re.findall(
        r'<script type="application/json" id="nnw-model" data-target="nnw-tree" data-bytes="preview_data">(.*?)</script>',
        text,
        re.S,
    )
    return json.loads(block)


def _token_view(text: str) -> dict:
    (block,) = re.findall(r'<script type="application/json" id="nnw-att-model"[^>]*>(.*?)</script>', text, re.S)
    return json.loads(block)


def _figures(text: str) -> dict:
    """Each ``Plotly.newPlot(id, data, layout, config)`` call plotly's writer put in the page."""
    decoder, figures = json.JSONDecoder(), {}
    for match in re.finditer(r"Plotly\.newPlot\(\s*", text):
        args, at = [], match.end()
        for _ in range(4):
            value, at = decoder.raw_decode(text, at)
            args.append(value)
            at = re.compile(r"\s*,?\s*").match(text, at).end()
        figures[args[0]] = {"data": args[1], "layout": args[2], "config": args[3]}
    return figures


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
    assert page.count("Plotly.newPlot") >= 2 and len(page) > 1_000_000  # plotly.js itself is inside
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")


def test_runs_the_widgets_own_front_end(page):
    """The page's modules are module_tree.js and attention_tokens.js as served to the
    widgets, each followed by the static model reading its own saved state."""
    modules = re.findall(r'<script type="module">(.*?)</script>', page, re.S)
    static = STATIC_MODEL_JS.read_text(encoding="utf-8")
    assert sorted(modules) == sorted(
        f'{module_text(entry)}\nconst STATIC_HOLDER = "{holder}";\n{static}'
        for entry, holder in ((MODULE_TREE_ESM, "nnw-model"), (ATTENTION_TOKENS_ESM, "nnw-att-model"))
    )
    for style in (MODULE_TREE_CSS.read_text(encoding="utf-8"), TOKEN_VIEW_STYLE):
        assert "<style>" + style + "</style>" in page
    assert TOKEN_CHIPS_CSS.read_text(encoding="utf-8") in TOKEN_VIEW_STYLE


def test_the_token_view_is_the_shown_heads_state(page):
    result = synthetic_result()
    saved = _token_view(page)
    state = text_view_state(result.attention, 1)
    assert saved["tokens"] == list(state.tokens) and saved["caption"] == state.caption == "layers[1] head 1"
    assert base64.b64decode(saved["weights"]) == state.weights and base64.b64decode(saved["scales"]) == state.scales
    assert saved["selected"] == 1
    block = re.search(r'id="nnw-att-model"[^>]*>(.*?)</script>', page, re.S).group(1)
    assert "<" not in block and ">" not in block and "&" not in block  # token text cannot end its script


def test_model_is_the_tree_state(page):
    result, tree = synthetic_result(), synthetic_tree()
    model = _model(page)
    assert model["tree"] == tree
    assert model["prompt_tokens"] == list(result.tokens.texts)  # raw text: the JS shows it
    assert model["selected_token"] == 1
    assert model["status"] == {"state": "idle", "message": ""}
    assert model["selected"] == "" and model["preview"] == {} and model["preview_data"] == ""


def test_preview_travels_as_base64():
    values = np.arange(8, dtype="<f4").reshape(2, 4)
    preview = {"id": "model.logits", "shape": [1, 2, 4], "dtype": "float32", "rows": ["a", "b"], "cols": 4}
    text = export_html(
        synthetic_result(), synthetic_tree(), selected="model.logits", preview=preview, preview_data=values.tobytes()
    )
    model = _model(text)
    assert model["selected"] == "model.logits" and model["preview"] == preview
    np.testing.assert_array_equal(np.frombuffer(base64.b64decode(model["preview_data"]), "<f4"), values.ravel())


def test_markup_only_escaped(page):
    assert XSS not in page
    assert "<img" not in page.lower()
    assert "<b>MLP</b>" not in page
    assert html.escape(XSS) in page  # the title and the meta line
    # the model's JSON carries the raw text, with no character that could end its script
    block = re.search(r'id="nnw-model"[^>]*>(.*?)</script>', page, re.S).group(1)
    assert "<" not in block and ">" not in block and "&" not in block
    assert "Qwen2<b>MLP</b>" in json.dumps(_model(page))
    # the figures carry it escaped once (plotly decodes the entities when it draws)
    figures = _figures(page)
    ticks = figures["nnw-attention"]["layout"]["xaxis"]["ticktext"]
    assert ticks[1] == escape_token(" " + XSS) == "␣&lt;img␣src=x␣onerror=alert(1)&gt;"
    assert figures["nnw-lens"]["data"][0]["customdata"][1][1][2] == escape_token(XSS)


def test_figures_hold_the_data(page):
    result = synthetic_result()
    figures = _figures(page)
    assert set(figures) == {"nnw-attention", "nnw-lens"}
    attention = figures["nnw-attention"]["data"][0]
    assert attention["type"] == "heatmap"
    np.testing.assert_array_equal(_decode(attention["z"]), result.attention.head(1))
    assert figures["nnw-attention"]["layout"]["title"]["text"] == "layers[1] head 1"
    assert len(figures["nnw-attention"]["layout"]["shapes"]) == 2  # selected row and column
    lens = figures["nnw-lens"]["data"][0]
    np.testing.assert_array_equal(_decode(lens["z"]), result.lens.top1_probs())
    assert figures["nnw-lens"]["config"]["displaylogo"] is False


def test_script_json_cannot_close_its_script():
    text = script_json({"title": "</script><script>alert(1)</script>&\u2028"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text)["title"] == "</script><script>alert(1)</script>&\u2028"


def test_write_to_path(tmp_path):
    path = tmp_path / "view.html"
    text = export_html(synthetic_result(), synthetic_tree(), path=path)
    assert path.read_text(encoding="utf-8") == text


def test_bad_layer_is_refused():
    with pytest.raises(IndexError, match="layer 7"):
        export_html(synthetic_result(), synthetic_tree(), layer=7)
