"""Browser test of the ModuleTree front end (nnterp_widgets/js/module_tree.js) ALONE.

This is not an engine or kernel test: a harness page (tests/browser/harness.html), served
from a temp dir on 127.0.0.1, imports the ES module and calls its ``render`` with a fake
anywidget model (get/set/on/off/save_changes/send) holding fixture data. Python-side
changes are simulated with ``model.pySet``. Every test runs twice: on the module as
anywidget gets it (`assets.module_text`: the entry with its parts inlined) and on the
source files as they are (the entry importing js/module_tree/*.js), which must behave
the same.

Needs the ``playwright`` Python package and a system Chromium at /usr/bin/chromium:

    .venv/bin/pip install playwright
    apt-get update && apt-get install -y chromium

(no ``playwright install``: the browser comes from apt). Skipped when either is missing.
Screenshots go to artifacts/screenshots/ (git-ignored).
"""

from __future__ import annotations

import functools
import http.server
import shutil
import threading
from pathlib import Path

import pytest

from browser_support import CONTRAST_JS, SHOTS, require_browser
from conftest import TOKEN_CASES
from nnterp_widgets.widgets.assets import MODULE_TREE_CSS, MODULE_TREE_ESM, module_text
from nnterp_widgets.figures.tokens import show_token

sync_api = require_browser()

HARNESS = Path(__file__).with_name("harness.html")

XSS = "<img src=x onerror=alert(1)>"
REASON = "the fused gate_up_proj kernel never materialises the activation; patch act_fn instead"
PROMPT = ["<|im_start|>", "Hello", " world", XSS, "\n"]
COLS = 8
PREVIEW_VALUES = [(i - 20) / 8 for i in range(len(PROMPT) * COLS)]  # exact in float32
MLP0_OUT = "model.model.layers.0.mlp.mlp_output"
MLP0_ACT = "model.model.layers.0.mlp.mlp_activation"


# ------------------------------------------------------------------------------ fixture


def _value(node_id, name, *, shape=(1, 5, 8), available=True, reason=None, writable=False, dtype="bfloat16"):
    return {
        "id": f"{node_id}.{name}",
        "name": name,
        "available": available,
        "reason": reason,
        "shape": list(shape) if available else None,
        "dtype": dtype if available else None,
        "writable": writable,
    }


def _node(id, name, native, type, *, standard=True, repeat=None, values=(), children=()):
    return {
        "id": id,
        "name": name,
        "native": native,
        "type": type,
        "standard": standard,
        "repeat": repeat,
        "values": list(values),
        "children": list(children),
    }


def _layer(i):
    base = f"model.model.layers.{i}"
    mlp = f"{base}.mlp"
    return _node(
        base,
        f"layers[{i}]",
        str(i),
        "TinyDecoderLayer",
        repeat={"group": "layers", "index": i, "count": 2},
        values=[_value(base, "layer_input", writable=True), _value(base, "layer_output", writable=True)],
        children=[
            _node(
                mlp,
                f"layers[{i}].mlp",
                "mlp",
                "Gated<b>MLP</b>",
                values=[
                    _value(mlp, "mlp_input"),
                    _value(mlp, "mlp_activation", available=False, reason=REASON),
                    _value(mlp, "mlp_output", writable=True),
                ],
                children=[
                    _node(
                        f"{mlp}.gate_up_proj",
                        "gate_up_proj",
                        "gate_up_proj",
                        "MergedColumnParallelLinear",
                        standard=False,
                        values=[_value(f"{mlp}.gate_up_proj", "output", shape=(1, 5, 32))],
                    ),
                    _node(f"{mlp}.down_proj", "down_proj", "down_proj", "RowParallelLinear", standard=False),
                ],
            ),
            _node(
                f"{base}.self_attn",
                f"layers[{i}].self_attn",
                "self_attn",
                "TinyAttention",
                values=[_value(f"{base}.self_attn", "attention_output")],
            ),
        ],
    )


def fixture_state(**over):
    tree = [
        _node(
            "model",
            "model",
            "model",
            "TinyForCausalLM",
            standard=False,
            children=[
                _node(
                    "model.model",
                    "model.model",
                    "model",
                    "TinyModel",
                    standard=False,
                    children=[
                        # non-standard first in the data: the widget must list standard names first
                        _node("model.model.rotary_emb", "rotary_emb", "rotary_emb", "RotaryEmbedding", standard=False),
                        _node(
                            "model.model.embed_tokens",
                            "embed_tokens",
                            "embed_tokens",
                            "VocabParallelEmbedding",
                            values=[_value("model.model.embed_tokens", "output")],
                        ),
                        _layer(0),
                        _layer(1),
                        _node(
                            "model.model.norm",
                            "ln_final",
                            "norm",
                            "RMSNorm",
                            values=[_value("model.model.norm", "output")],
                        ),
                    ],
                ),
                _node(
                    "model.lm_head",
                    "lm_head",
                    "lm_head",
                    "ParallelLMHead",
                    values=[_value("model.lm_head", "logits", shape=(1, 5, 151936), dtype="float32")],
                ),
            ],
        )
    ]
    state = {
        "tree": tree,
        "selected": "",
        "preview": {},
        "preview_data": [],
        "status": {"state": "idle", "message": ""},
        "prompt_tokens": PROMPT,
        "selected_token": -1,
    }
    state.update(over)
    return state


def preview_state():
    return {
        "selected": MLP0_OUT,
        "preview": {
            "id": MLP0_OUT,
            "shape": [1, 5, 896],
            "dtype": "bfloat16",
            "stats": {"min": -2.5, "max": 2.375, "mean": -0.0625, "norm": 8.7},
            "rows": PROMPT,
            "cols": COLS,
        },
        "preview_data": PREVIEW_VALUES,
    }


JL_LIGHT = {
    "--jp-layout-color0": "white",
    "--jp-layout-color1": "white",
    "--jp-layout-color2": "#eeeeee",
    "--jp-ui-font-color0": "rgba(0, 0, 0, 1)",
    "--jp-ui-font-color1": "rgba(0, 0, 0, 0.87)",
    "--jp-ui-font-color2": "rgba(0, 0, 0, 0.54)",
    "--jp-ui-font-color3": "rgba(0, 0, 0, 0.38)",
    "--jp-border-color1": "#bdbdbd",
    "--jp-border-color2": "#e0e0e0",
    "--jp-brand-color1": "#1976d2",
    "--jp-error-color1": "#d32f2f",
    "--jp-ui-font-family": "system-ui, sans-serif",
    "--jp-code-font-family": "monospace",
    "--jp-ui-font-size1": "13px",
}
JL_DARK = {
    "--jp-layout-color0": "#111111",
    "--jp-layout-color1": "#212121",
    "--jp-layout-color2": "#424242",
    "--jp-ui-font-color0": "rgba(255, 255, 255, 1)",
    "--jp-ui-font-color1": "rgba(255, 255, 255, 0.87)",
    "--jp-ui-font-color2": "rgba(255, 255, 255, 0.54)",
    "--jp-ui-font-color3": "rgba(255, 255, 255, 0.38)",
    "--jp-border-color1": "#616161",
    "--jp-border-color2": "#424242",
    "--jp-brand-color1": "#1976d2",
    "--jp-error-color1": "#d32f2f",
    "--jp-ui-font-family": "system-ui, sans-serif",
    "--jp-code-font-family": "monospace",
    "--jp-ui-font-size1": "13px",
}

# Contrast of a heat cell's fill against the widget background (non-text contrast).
CELL_CONTRAST_JS = """
(td) => {
  const parse = (c) => {
    const m = c.match(/^rgba?\\(([^)]+)\\)$/);
    const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const bg = parse(getComputedStyle(td.closest('.nnw-mt')).backgroundColor);
  const c = parse(getComputedStyle(td).backgroundColor);
  const fill = [0, 1, 2].map(i => c[i] * c[3] + bg[i] * (1 - c[3]));
  const lum = (x) => {
    const [r, g, b] = x.map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const L1 = lum(fill), L2 = lum(bg.slice(0, 3));
  return (Math.max(L1, L2) + 0.05) / (Math.min(L1, L2) + 0.05);
}
"""


# ---------------------------------------------------------------------- server, browser


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass


@pytest.fixture(scope="module", params=["served", "files"])
def base_url(tmp_path_factory, request):
    root = tmp_path_factory.mktemp("module_tree_harness")
    if request.param == "served":  # one module, as anywidget gets it
        (root / "module_tree.js").write_text(module_text(MODULE_TREE_ESM), encoding="utf-8")
    else:  # the files as written: the browser resolves the entry's imports
        shutil.copy(MODULE_TREE_ESM, root / "module_tree.js")
        shutil.copytree(MODULE_TREE_ESM.parent / "module_tree", root / "module_tree")
    shutil.copy(MODULE_TREE_CSS, root / "module_tree.css")
    shutil.copy(HARNESS, root / "index.html")
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/index.html"
    server.shutdown()
    server.server_close()


class Harness:
    def __init__(self, page):
        self.page = page
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        self.requests: list[str] = []
        page.on("dialog", self._on_dialog)
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        page.on("console", lambda msg: msg.type == "error" and self.errors.append(msg.text))
        page.on("request", lambda req: self.requests.append(req.url))

    def _on_dialog(self, dialog):
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    def boot(self, state=None, theme=None):
        css = ""
        if theme:
            css = ":root {" + "".join(f"{k}: {v};" for k, v in theme.items()) + "}"
        self.page.evaluate("css => { document.getElementById('theme').textContent = css; }", css)
        self.page.evaluate("s => boot(s)", state or fixture_state())

    def py_set(self, key, value):
        if key == "preview_data":
            self.page.evaluate("v => __model.pySet('preview_data', f32(v))", value)
        else:
            self.page.evaluate("([k, v]) => __model.pySet(k, v)", [key, value])

    def get(self, key):
        return self.page.evaluate("k => __model.get(k)", key)

    def saves(self):
        """What the JS saved, less its theme reports (checked on their own)."""
        return [save for save in self.page.evaluate("() => __model.saves") if set(save) != {"theme"}]

    def theme_reports(self):
        return [save["theme"] for save in self.page.evaluate("() => __model.saves") if "theme" in save]

    def row(self, key):
        return self.page.locator(f'[role=treeitem][data-key="{key}"]')

    def value_row(self, id):
        return self.row("v:" + id)

    def node_row(self, id):
        return self.row("n:" + id)

    def keys(self):
        return self.page.eval_on_selector_all("[role=treeitem]", "els => els.map(e => e.dataset.key)")


@pytest.fixture
def h(browser, base_url):
    page = browser.new_page(viewport={"width": 1000, "height": 900})
    hh = Harness(page)
    page.goto(base_url)
    page.wait_for_function("window.__ready === true")
    hh.boot()
    yield hh
    try:
        assert hh.errors == [], f"page errors: {hh.errors}"
        assert hh.dialogs == [], f"dialogs fired: {hh.dialogs}"
        origin = base_url.rsplit("/", 1)[0]
        outside = [u for u in hh.requests if not (u.startswith(origin) or u.startswith("data:"))]
        assert outside == [], f"requests left 127.0.0.1: {outside}"
    finally:
        page.close()


# ---------------------------------------------------------------------------- the tests


def test_tree_renders_standard_names_first(h):
    keys = h.keys()
    page = h.page
    assert page.locator("[role=tree]").count() == 1
    assert page.locator(".nnw-mt").get_attribute("data-lm-suppress-shortcuts") == "true"
    assert h.page.locator('[role=treeitem][tabindex="0"]').count() == 1  # roving tabindex
    names = page.eval_on_selector_all("[role=treeitem] .nnw-mt-name", "els => els.map(e => e.textContent)")
    for n in ["embed_tokens", "layers[0]", "layers[0].mlp", "layers[0].self_attn", "ln_final", "lm_head"]:
        assert n in names
    # siblings under model.model: standard ones (embed_tokens, layers, ln_final) before rotary_emb
    assert keys.index("n:model.model.embed_tokens") < keys.index("g:n:model.model|layers")
    assert keys.index("n:model.model.norm") < keys.index("n:model.model.rotary_emb")
    # standard children of the mlp before its native ones
    assert keys.index("n:model.model.layers.0.mlp") < keys.index("n:model.model.layers.0.mlp.gate_up_proj")
    # repeated blocks under one group row; layers[1] starts collapsed, layers[0] expanded
    group = h.row("g:n:model.model|layers")
    assert group.locator(".nnw-mt-name").text_content() == "layers[0..1]"
    assert "2 \u00d7 TinyDecoderLayer" in group.text_content()
    assert h.node_row("model.model.layers.1").get_attribute("aria-expanded") == "false"
    assert h.node_row("model.model.layers.0").get_attribute("aria-expanded") == "true"
    assert h.node_row("model.model.layers.0").get_attribute("aria-level") == "4"
    # node line: name + muted type (markup in the type is text)
    mlp = h.node_row("model.model.layers.0.mlp")
    assert mlp.locator(".nnw-mt-type").text_content() == "Gated<b>MLP</b>"
    # value line: name, shape, dtype
    out = h.value_row(MLP0_OUT)
    assert out.locator(".nnw-mt-shape").text_content() == "[1, 5, 8]"
    assert out.locator(".nnw-mt-dtype").text_content() == "bfloat16"
    assert out.get_attribute("aria-selected") == "false"
    # values come before child modules under a node
    assert keys.index("v:" + MLP0_OUT) < keys.index("n:model.model.layers.0.mlp.gate_up_proj")


def test_split_model_shows_its_tensor_parallel_size(h):
    model = h.node_row("model")
    assert model.locator(".nnw-mt-tp").count() == 0  # one worker: nothing to say
    state = fixture_state()
    state["tree"][0]["tensor_parallel_size"] = 2
    h.py_set("tree", state["tree"])
    chip = h.node_row("model").locator(".nnw-mt-tp")
    assert chip.text_content() == "tp=2"
    assert "2 workers" in chip.get_attribute("title")


def test_unavailable_value_is_greyed_with_reason(h):
    row = h.value_row(MLP0_ACT)
    assert row.get_attribute("title") == REASON
    assert row.get_attribute("aria-disabled") == "true"
    desc_id = row.get_attribute("aria-describedby")
    assert desc_id
    desc = h.page.evaluate("id => document.getElementById(id).textContent", desc_id)
    assert REASON in desc
    style = h.page.evaluate(
        """el => { const n = el.querySelector('.nnw-mt-name'); const cs = getComputedStyle(n);
                   return {deco: cs.textDecorationLine, color: cs.color,
                           served: getComputedStyle(document.querySelector(
                             '[data-key="v:model.model.layers.0.mlp.mlp_output"] .nnw-mt-name')).color}; }""",
        row.element_handle(),
    )
    assert "line-through" in style["deco"]
    assert style["color"] != style["served"]  # muted


def test_click_served_value_selects_it(h):
    h.value_row(MLP0_OUT).click()
    assert h.get("selected") == MLP0_OUT
    assert h.saves() == [{"selected": MLP0_OUT}]
    assert h.value_row(MLP0_OUT).get_attribute("aria-selected") == "true"
    # placeholder waits for Python's preview
    assert "Waiting for a preview" in h.page.locator(".nnw-mt-previewpane").text_content()
    # clicking the greyed value does not select it, only shows its reason
    # (force: the row is aria-disabled, which Playwright treats as not clickable; a user can)
    h.value_row(MLP0_ACT).click(force=True)
    assert h.get("selected") == MLP0_OUT
    assert h.saves() == [{"selected": MLP0_OUT}]
    assert REASON in h.page.locator(".nnw-mt-note").text_content()
    assert h.value_row(MLP0_ACT).get_attribute("aria-selected") == "false"


def test_filter_hides_non_matching_rows_and_keeps_ancestors(h):
    h.page.fill(".nnw-mt-filter", "ACTIVATION")
    keys = h.keys()
    assert "v:" + MLP0_ACT in keys
    assert "v:model.model.layers.1.mlp.mlp_activation" in keys  # inside the collapsed layer too
    for anc in [
        "n:model",
        "n:model.model",
        "g:n:model.model|layers",
        "n:model.model.layers.0",
        "n:model.model.layers.0.mlp",
    ]:
        assert anc in keys
    for gone in [
        "n:model.model.embed_tokens",
        "v:" + MLP0_OUT,
        "n:model.lm_head",
        "n:model.model.layers.0.self_attn",
        "n:model.model.layers.0.mlp.gate_up_proj",
    ]:
        assert gone not in keys
    assert h.page.locator(".nnw-mt-count").text_content() == "2 matches"
    assert h.page.locator("mark.nnw-mt-hit").first.text_content() == "activation"
    # a value matches on its full standard name too
    h.page.fill(".nnw-mt-filter", "layers[1].mlp.mlp_out")
    assert [k for k in h.keys() if k.startswith("v:")] == ["v:model.model.layers.1.mlp.mlp_output"]
    h.page.fill(".nnw-mt-filter", "zzz-nothing")
    assert h.keys() == []
    assert "Nothing matches" in h.page.locator(".nnw-mt-tree").text_content()
    # clearing restores the tree with its previous expansion (layers[1] collapsed)
    h.page.fill(".nnw-mt-filter", "")
    keys = h.keys()
    assert "n:model.model.embed_tokens" in keys and "v:" + MLP0_OUT in keys
    assert "n:model.model.layers.1.mlp" not in keys


def test_collapse_layers_group_and_nodes(h):
    group = h.row("g:n:model.model|layers")
    assert group.get_attribute("aria-expanded") == "true"
    group.click()
    group = h.row("g:n:model.model|layers")
    assert group.get_attribute("aria-expanded") == "false"
    keys = h.keys()
    assert not any(k.startswith("n:model.model.layers.") for k in keys)
    assert "n:model.model.norm" in keys
    group.click()
    assert "n:model.model.layers.1" in h.keys()
    # expand layers[1], collapse layers[0].mlp by clicking their rows
    h.node_row("model.model.layers.1").click()
    assert "v:model.model.layers.1.mlp.mlp_output" in h.keys()
    h.node_row("model.model.layers.0.mlp").click()
    assert "v:" + MLP0_OUT not in h.keys()
    # expansion survives a new tree from Python
    h.py_set("tree", fixture_state()["tree"])
    keys = h.keys()
    assert "v:" + MLP0_OUT not in keys
    assert "v:model.model.layers.1.mlp.mlp_output" in keys
    # collapse all / expand all
    h.page.click("text=Collapse all")
    assert h.keys() == ["n:model"]
    h.page.click("text=Expand all")
    assert "n:model.model.layers.1.mlp.down_proj" in h.keys()


def test_keyboard_navigation(h):
    page = h.page
    first = page.locator('[role=treeitem][tabindex="0"]')
    assert first.get_attribute("data-key") == "n:model"
    first.focus()
    focused = lambda: page.evaluate("() => document.activeElement.dataset.key")  # noqa: E731
    page.keyboard.press("End")
    assert focused() == "n:model.model.rotary_emb"  # non-standard, listed last
    page.keyboard.press("Home")
    assert focused() == "n:model"
    # ArrowDown to the first value (lm_head is standard, so before model.model), Enter selects it
    for _ in range(20):
        page.keyboard.press("ArrowDown")
        if focused().startswith("v:"):
            break
    assert focused() == "v:model.lm_head.logits"
    assert page.locator('[role=treeitem][tabindex="0"]').count() == 1
    page.keyboard.press("Enter")
    assert h.get("selected") == "model.lm_head.logits"
    page.keyboard.press("ArrowDown")
    assert focused() == "n:model.model"
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    assert focused() == "g:n:model.model|layers"
    page.keyboard.press("ArrowLeft")  # collapse the group
    assert h.row("g:n:model.model|layers").get_attribute("aria-expanded") == "false"
    assert focused() == "g:n:model.model|layers"
    page.keyboard.press("ArrowRight")  # expand it
    assert h.row("g:n:model.model|layers").get_attribute("aria-expanded") == "true"
    page.keyboard.press("ArrowRight")  # into the first member
    assert focused() == "n:model.model.layers.0"
    page.keyboard.press("ArrowDown")
    assert focused() == "v:model.model.layers.0.layer_input"
    page.keyboard.press(" ")
    assert h.get("selected") == "model.model.layers.0.layer_input"
    page.keyboard.press("ArrowLeft")  # on a leaf: to the parent
    assert focused() == "n:model.model.layers.0"
    # Enter on an unavailable value does not select it
    h.value_row(MLP0_ACT).focus()
    page.keyboard.press("Enter")
    assert h.get("selected") == "model.model.layers.0.layer_input"
    assert REASON in page.locator(".nnw-mt-note").text_content()
    assert h.saves() == [{"selected": "model.lm_head.logits"}, {"selected": "model.model.layers.0.layer_input"}]
    # focus stays on the same row across a tree re-render
    h.py_set("tree", fixture_state()["tree"])
    assert focused() == "v:" + MLP0_ACT
    # filter box: ArrowDown jumps into the tree
    page.focus(".nnw-mt-filter")
    page.keyboard.press("ArrowDown")
    assert focused() == "n:model"


def test_show_token_follows_the_shared_table(h):
    shown = h.page.evaluate("texts => texts.map(showToken)", [case["text"] for case in TOKEN_CASES])
    assert shown == [case["shown"] for case in TOKEN_CASES]


def test_markup_renders_as_text(h):
    page = h.page
    h.py_set("preview_data", PREVIEW_VALUES)
    for k, v in preview_state().items():
        if k != "preview_data":
            h.py_set(k, v)
    chips = page.eval_on_selector_all(".nnw-mt-chip", "els => els.map(e => e.textContent)")
    assert chips == [show_token(t) for t in PROMPT]
    texts = [case["text"] for case in TOKEN_CASES]
    h.py_set("prompt_tokens", texts)  # every case of the shared token table, as chips
    chips = page.eval_on_selector_all(".nnw-mt-chip", "els => els.map(e => e.textContent)")
    assert chips == [case["shown"] for case in TOKEN_CASES]
    h.py_set("prompt_tokens", PROMPT)
    labels = page.eval_on_selector_all(".nnw-mt-rowlabel", "els => els.map(e => e.textContent)")
    assert labels[3] == show_token(XSS)
    h.py_set("status", {"state": "error", "message": "<script>alert(2)</script>" + XSS})
    assert "<script>alert(2)</script>" in page.locator(".nnw-mt-error").text_content()
    page.wait_for_timeout(200)  # give any injected onerror a chance to fire
    assert page.locator("img").count() == 0
    tags = set(page.eval_on_selector_all("#host *", "els => els.map(e => e.tagName.toLowerCase())"))
    assert tags <= {"div", "span", "input", "button", "table", "caption", "tbody", "tr", "th", "td", "mark", "pre"}, (
        tags
    )
    assert h.dialogs == []


def test_preview_heat_table_and_token_link(h):
    page = h.page
    h.py_set("preview_data", PREVIEW_VALUES)
    for k, v in preview_state().items():
        if k != "preview_data":
            h.py_set(k, v)
    assert h.value_row(MLP0_OUT).get_attribute("aria-selected") == "true"
    assert page.locator(".nnw-mt-pid").text_content() == MLP0_OUT
    stats = page.locator(".nnw-mt-stats").text_content()
    assert "min -2.5" in stats and "max 2.375" in stats and "mean -0.0625" in stats and "norm 8.7" in stats
    rows = page.locator(".nnw-mt-heat tbody tr")
    assert rows.count() == len(PROMPT)
    cells = page.locator(".nnw-mt-cell")
    assert cells.count() == len(PROMPT) * COLS
    titles = page.eval_on_selector_all(".nnw-mt-cell", "els => els.map(e => e.title)")
    for i in (0, 9, 20, 39):
        num = f"{PREVIEW_VALUES[i]:g}"
        assert titles[i].startswith(num + " "), (titles[i], num)
    assert "first 8 of 896" in page.locator(".nnw-mt-heat caption").text_content()
    # zero is transparent; extremes are opaque; sign picks the hue
    bgs = page.eval_on_selector_all(".nnw-mt-cell", "els => els.map(e => e.style.backgroundColor)")
    assert bgs[20] in ("transparent", "rgba(214, 96, 77, 0)")
    assert bgs[0] == "rgb(67, 147, 195)"
    # token chip selects a token, the preview row is highlighted, clicking again clears
    page.locator(".nnw-mt-chip").nth(3).click()
    assert h.get("selected_token") == 3
    assert h.saves()[-1] == {"selected_token": 3}
    assert page.locator(".nnw-mt-chip").nth(3).get_attribute("aria-pressed") == "true"
    assert page.locator("tr.nnw-mt-tokrow").get_attribute("data-token") == "3"
    page.locator(".nnw-mt-chip").nth(3).click()
    assert h.get("selected_token") == -1
    assert page.locator("tr.nnw-mt-tokrow").count() == 0
    # a row label selects its token; Python can set it too
    page.locator(".nnw-mt-rowlabel").nth(1).click()
    assert h.get("selected_token") == 1
    h.py_set("selected_token", 4)
    assert page.locator("tr.nnw-mt-tokrow").get_attribute("data-token") == "4"
    # selecting another value marks the old preview stale until Python answers
    h.value_row("model.model.embed_tokens.output").click()
    assert page.locator(".nnw-mt-preview.nnw-mt-stale").count() == 1
    # chips: roving tabindex with arrow keys
    page.locator(".nnw-mt-chip").nth(4).focus()
    page.keyboard.press("ArrowLeft")
    assert page.evaluate("() => document.activeElement.dataset.index") == "3"
    page.keyboard.press("Enter")
    assert h.get("selected_token") == 3


def test_status_busy_and_error(h):
    page = h.page
    assert page.locator(".nnw-mt-status").is_hidden()
    h.py_set("status", {"state": "busy", "message": "tracing 5 tokens"})
    assert page.locator(".nnw-mt-status-busy").text_content() == "tracing 5 tokens"
    assert page.locator(".nnw-mt").get_attribute("aria-busy") == "true"
    h.py_set("status", {"state": "error", "message": "CUDA out of memory"})
    box = page.locator(".nnw-mt-error")
    assert box.get_attribute("role") == "alert"
    assert "Error" in box.text_content() and "CUDA out of memory" in box.text_content()
    assert page.locator(".nnw-mt").get_attribute("aria-busy") == "false"
    h.py_set("status", {"state": "idle", "message": ""})
    assert page.locator(".nnw-mt-error").count() == 0


def test_selected_from_python_is_revealed(h):
    target = "model.model.layers.1.mlp.mlp_output"
    assert "v:" + target not in h.keys()
    h.py_set("selected", target)
    row = h.value_row(target)
    assert row.get_attribute("aria-selected") == "true"
    assert h.saves() == []  # a change from Python is not echoed back


def test_cleanup_removes_listeners(h):
    page = h.page
    assert page.evaluate("() => __model.listenerCount()") > 0
    page.evaluate("() => { __cleanup(); window.__cleanup = null; }")
    assert page.evaluate("() => __model.listenerCount()") == 0
    assert page.evaluate("() => document.getElementById('host').children.length") == 0
    h.py_set("tree", [])  # no listener left to throw


def _theme_check(h, theme, name, *, emulate=None):
    page = h.page
    if emulate:
        page.emulate_media(color_scheme=emulate)
    h.boot(fixture_state(**{k: v for k, v in preview_state().items()}), theme=theme)
    h.py_set("selected_token", 3)
    h.py_set("status", {"state": "error", "message": "example error: the engine is not running"})
    results = {}
    for label, sel in {
        "served value": f'[data-key="v:{MLP0_OUT}"] .nnw-mt-name',
        "other served value": '[data-key="v:model.model.embed_tokens.output"] .nnw-mt-name',
        "value shape": '[data-key="v:model.model.embed_tokens.output"] .nnw-mt-shape',
        "greyed value": f'[data-key="v:{MLP0_ACT}"] .nnw-mt-name',  # muted, still readable
        "node name": '[data-key="n:model.model.layers.0.mlp"] .nnw-mt-name',
        "node type": '[data-key="n:model.model.layers.0.mlp"] .nnw-mt-type',
        "token chip": ".nnw-mt-chip",
        "pressed chip": '.nnw-mt-chip[aria-pressed="true"]',
        "row label": ".nnw-mt-rowlabel",
        "highlighted row label": "tr.nnw-mt-tokrow .nnw-mt-rowlabel",
        "stats": ".nnw-mt-stats",
        "error message": ".nnw-mt-error-msg",
        "error title": ".nnw-mt-error-title",
        "filter box": ".nnw-mt-filter",
    }.items():
        res = page.evaluate(CONTRAST_JS, sel)
        assert res is not None, sel
        results[label] = round(res["ratio"], 2)
    low = {k: v for k, v in results.items() if v < 4.5}
    assert low == {}, f"{name}: contrast below 4.5: {low} (all: {results})"
    # heat extremes stay distinguishable from the background (non-text contrast >= 3)
    cells = page.locator(".nnw-mt-cell")
    for i in (0, len(PREVIEW_VALUES) - 1):
        ratio = page.evaluate(CELL_CONTRAST_JS, cells.nth(i).element_handle())
        assert ratio >= 3, f"{name}: heat cell {i} contrast {ratio:.2f}"
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.locator("#host").screenshot(path=str(SHOTS / f"module_tree_{name}.png"))
    return results


def test_theme_light(h):
    _theme_check(h, JL_LIGHT, "light")


def test_theme_dark(h):
    res = _theme_check(h, JL_DARK, "dark")
    bg = h.page.evaluate("() => getComputedStyle(document.querySelector('.nnw-mt')).backgroundColor")
    assert bg == "rgb(17, 17, 17)", res


def test_theme_fallbacks_without_jupyterlab(h):
    """No --jp-* variables: the built-in fallbacks follow prefers-color-scheme."""
    _theme_check(h, None, "fallback_light", emulate="light")
    _theme_check(h, None, "fallback_dark", emulate="dark")
    bg = h.page.evaluate("() => getComputedStyle(document.querySelector('.nnw-mt')).backgroundColor")
    assert bg == "rgb(17, 17, 17)"


def test_reports_the_page_theme(h):
    """JupyterLab marks the body with data-jp-theme-light; the tree reports it to Python
    (the plotly panels follow it), at render and on every change."""
    h.boot(fixture_state())
    page = h.page
    page.evaluate("() => { document.body.dataset.jpThemeLight = 'false'; }")
    page.wait_for_function("() => __model.get('theme') === 'dark'", timeout=5000)
    page.evaluate("() => { document.body.dataset.jpThemeLight = 'true'; }")
    page.wait_for_function("() => __model.get('theme') === 'light'", timeout=5000)
    assert h.theme_reports()[-2:] == ["dark", "light"]


def test_a_greyed_values_reason_is_drawn_on_hover_and_on_focus(h):
    """Not only a native tooltip (drawn in some browsers only, never reached by keys): the
    reason is drawn under the tree when the value is hovered or focused, and goes when
    the pointer moves to a served value."""
    note = h.page.locator(".nnw-mt-note")
    h.value_row(MLP0_ACT).hover()
    assert REASON in note.text_content()
    h.value_row(MLP0_OUT).hover()
    assert note.text_content() == ""
    h.value_row(MLP0_ACT).focus()
    assert REASON in note.text_content()
