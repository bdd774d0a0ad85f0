"""Browser test of the attention view's token view (nnterp_widgets/js/attention_tokens.js)
alone: no kernel, no engine. The module runs in Chromium on a fake anywidget model fed
the state `text_view_state` makes of a synthetic panel; the test hovers tokens and checks
each token's shade is its weight on the query's own scale (what the Python state says),
that a click and the keyboard select, and that token text stays text."""

from __future__ import annotations

import base64

import pytest

from browser_support import require_browser
from nnterp_widgets.widgets.assets import ATTENTION_TOKENS_ESM, module_text
from nnterp_widgets.widgets.attention_text import TOKEN_VIEW_STYLE, AttentionText, text_view_state
from test_export import synthetic_result

require_browser()

FAKE_MODEL = """
const state = window.initial;
for (const key of ["weights", "scales"]) {
  const bytes = Uint8Array.from(atob(state[key]), (c) => c.charCodeAt(0));
  state[key] = new DataView(bytes.buffer);
}
const listeners = {};
window.saved = [];
window.model = {
  get: (k) => state[k],
  set: (k, v) => { state[k] = v; },
  save_changes: () => window.saved.push(state.selected),
  on: (e, f) => { (listeners[e] = listeners[e] || []).push(f); },
  off: (e, f) => { listeners[e] = (listeners[e] || []).filter((g) => g !== f); },
  send() {},
  pySet: (k, v) => { state[k] = v; (listeners["change:" + k] || []).forEach((f) => f()); },
};
window.setRows = (rows, weights, scales) => {  // a state holding only some rows, from Python
  const view = (b64) => new DataView(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)).buffer);
  state.rows = rows; state.weights = view(weights); state.scales = view(scales);
  (listeners["change:rows"] || []).forEach((f) => f());
};
window.cleanup = render({ model: window.model, el: document.getElementById("host") });
"""

SHADES = """() => [...document.querySelectorAll('.nnw-att-token')].map(s => {
  const m = /rgba?\\(([^)]*)\\)/.exec(s.style.background || '');  // an alpha of 1 reads back as rgb()
  const parts = m ? m[1].split(',') : [];
  return {alpha: m ? (parts.length > 3 ? Number(parts[3]) : 1) : 0, after: s.classList.contains('nnw-att-after'),
          query: s.classList.contains('nnw-att-query'), title: s.title, text: s.textContent};
})"""


BOXES = """() => [...document.querySelectorAll('.nnw-att-token')].map(s => {
  const r = s.getBoundingClientRect(); return [r.left, r.top, r.width];
})"""


@pytest.fixture()
def synthetic():
    result = synthetic_result()
    return result.attention, text_view_state(result.attention, 1)


@pytest.fixture()
def page(browser, synthetic):
    _, state = synthetic
    initial = {
        "tokens": list(state.tokens),
        "rows": list(state.rows),
        "weights": base64.b64encode(state.weights).decode(),
        "scales": base64.b64encode(state.scales).decode(),
        "shade": AttentionText.shade.default_value,
        "caption": state.caption,
        "selected": -1,
    }
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.set_content('<!doctype html><html lang="en"><body><div id="host"></div></body></html>')
    page.add_style_tag(content=TOKEN_VIEW_STYLE)
    page.evaluate("(s) => { window.initial = s; }", initial)
    page.add_script_tag(content=module_text(ATTENTION_TOKENS_ESM) + FAKE_MODEL, type="module")
    page.wait_for_function("() => window.cleanup !== undefined")
    yield page
    assert errors == []
    page.close()


def _expected(state, query: int) -> list[float]:
    row, top = state.row(query), state.scale(query)
    return [min(1.0, float(row[key]) / top) if key <= query else 0.0 for key in range(len(state.tokens))]


def test_hovering_a_token_shades_what_it_attends_to_on_its_own_scale(page, synthetic):
    _, state = synthetic
    tokens = page.locator(".nnw-att-token")
    assert tokens.count() == len(state.tokens)
    assert all(shade["alpha"] == 0 for shade in page.evaluate(SHADES))  # nothing hovered or selected
    boxes = page.evaluate(BOXES)
    for query in (len(state.tokens) - 1, 2):
        tokens.nth(query).hover()
        shades = page.evaluate(SHADES)
        assert [s["alpha"] for s in shades] == pytest.approx(_expected(state, query), abs=0.006)
        assert [s["after"] for s in shades] == [key > query for key in range(len(shades))]
        assert [s["query"] for s in shades] == [key == query for key in range(len(shades))]
        assert shades[0]["title"] == f"key 0: weight {state.row(query)[0]:.3f}"
        assert page.evaluate(BOXES) == boxes  # shading moves no token (none slips from the pointer)
    strongest = max(range(1, 3), key=lambda key: state.row(2)[key])  # off the first token: saturates
    assert page.evaluate(SHADES)[strongest]["alpha"] == 1.0
    page.mouse.move(900, 900)  # off the view: back to the selection (none)
    assert all(shade["alpha"] == 0 for shade in page.evaluate(SHADES))
    assert page.evaluate("() => saved") == []  # a hover writes nothing to the kernel


def test_a_click_or_the_keyboard_selects_and_the_selection_stays_shaded(page, synthetic):
    _, state = synthetic
    page.locator(".nnw-att-token").nth(3).click()
    assert page.evaluate("() => [model.get('selected'), saved]") == [3, [3]]
    page.mouse.move(900, 900)
    assert [s["alpha"] for s in page.evaluate(SHADES)] == pytest.approx(_expected(state, 3), abs=0.006)
    root = page.locator(".nnw-att-text")
    root.focus()
    root.press("ArrowLeft")  # the keyboard's cursor starts at the selection
    root.press("ArrowLeft")
    assert [s["query"] for s in page.evaluate(SHADES)].index(True) == 2
    root.press("Enter")
    assert page.evaluate("() => model.get('selected')") == 2
    page.evaluate("() => model.pySet('selected', 1)")  # the explorer's selection, from Python
    root.press("Escape")
    assert [s["query"] for s in page.evaluate(SHADES)].index(True) == 1


def test_token_text_is_text(page, synthetic):
    panel, state = synthetic
    texts = page.evaluate(SHADES)
    assert [s["text"] for s in texts] == list(state.tokens)
    assert "<img" in "".join(state.tokens)  # the synthetic prompt holds markup ...
    assert page.locator("#host img").count() == 0  # ... shown as text
    page.evaluate("() => window.cleanup()")
    assert page.locator(".nnw-att-text").count() == 0


def test_with_only_the_selected_querys_row_a_hover_elsewhere_shades_nothing(page, synthetic):
    # Past the pattern side the view holds the selected query's row alone.
    _, state = synthetic
    n = len(state.tokens)
    weights = base64.b64encode(state.weights[2 * n : 3 * n]).decode()
    scales = base64.b64encode(state.scales[8:12]).decode()
    page.evaluate("([w, s]) => { window.setRows([2], w, s); model.pySet('selected', 2); }", [weights, scales])
    assert [s["alpha"] for s in page.evaluate(SHADES)] == pytest.approx(_expected(state, 2), abs=0.006)
    assert "click a token" in page.locator(".nnw-att-caption").text_content()
    tokens = page.locator(".nnw-att-token")
    tokens.nth(4).hover()  # no row for it: outlined, nothing shaded, and it says a click shows it
    shades = page.evaluate(SHADES)
    assert all(s["alpha"] == 0 for s in shades) and [s["query"] for s in shades].index(True) == 4
    assert tokens.nth(4).get_attribute("title") == "click to see what this token attends to"
    tokens.nth(4).click()
    assert page.evaluate("() => [model.get('selected'), saved]") == [4, [4]]  # the kernel then sends its row
