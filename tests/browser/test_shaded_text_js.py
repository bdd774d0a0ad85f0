"""Browser test of the shaded text view (nnterp_widgets/js/shaded_text.js) alone: no
kernel, no engine. The module runs in Chromium on a fake anywidget model fed what
`ShadedTextView.show` sends; the test checks each token's shade is its value's sign and
size (what the Python data says), that the strongest are listed and a click on a token or
on a listed one selects it, and that token text stays text."""

from __future__ import annotations

import base64

import numpy as np
import pytest

from browser_support import require_browser
from nnterp_widgets.figures import ShadedText
from nnterp_widgets.figures.shaded import NEGATIVE, POSITIVE
from nnterp_widgets.widgets.assets import SHADED_TEXT_ESM, module_text
from nnterp_widgets.widgets.shaded_text import SHADED_TEXT_STYLE, ShadedTextView

require_browser()

FAKE_MODEL = """
const state = window.initial;
const bytes = Uint8Array.from(atob(state.values), (c) => c.charCodeAt(0));
state.values = new DataView(bytes.buffer);
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
window.cleanup = render({ model: window.model, el: document.getElementById("host") });
"""

SHADES = """() => [...document.querySelectorAll('.nnw-shaded-token')].map(s => {
  const m = /rgba?\\(([^)]*)\\)/.exec(s.style.backgroundColor || '');
  const parts = m ? m[1].split(',').map(Number) : [];
  return {rgb: parts.slice(0, 3).join(', '), alpha: m ? (parts.length > 3 ? parts[3] : 1) : 0,
          title: s.title, text: s.textContent, selected: s.classList.contains('nnw-chip-selected')};
})"""

TEXTS = [" The", " <b>Eiffel</b>", " Tower", " is", " in", "\n", " the"]
VALUES = [-0.5, -3.0, 1.5, 0.0, np.nan, 0.75, -1.0]


@pytest.fixture()
def shaded():
    return ShadedText.of(TEXTS, VALUES, caption="Δ logit of ␣Paris", unit="Δ logit")


@pytest.fixture()
def page(browser, shaded):
    view = ShadedTextView()
    view.show(shaded, strongest=3)
    initial = {
        name: getattr(view, name) for name in ("tokens", "half", "notes", "strongest", "unit", "caption", "full")
    }
    initial.update(values=base64.b64encode(view.values).decode(), negative=NEGATIVE, positive=POSITIVE, selected=-1)
    view.close()
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.set_content('<!doctype html><html lang="en"><body><div id="host"></div></body></html>')
    page.add_style_tag(content=SHADED_TEXT_STYLE)
    page.evaluate("(s) => { window.initial = s; }", initial)
    page.add_script_tag(content=module_text(SHADED_TEXT_ESM) + FAKE_MODEL, type="module")
    page.wait_for_function("() => window.cleanup !== undefined")
    yield page
    assert errors == []
    page.close()


def test_each_token_is_shaded_by_its_values_sign_and_size(page, shaded):
    shades = page.evaluate(SHADES)
    assert [s["text"] for s in shades] == list(shaded.tokens)
    # The browser draws each shade as the page export does (`ShadedText.shade`, one rule).
    wanted = [float(shaded.shade(i).rsplit(",", 1)[1].rstrip(")")) if shaded.shade(i) else 0 for i in range(len(TEXTS))]
    assert [s["alpha"] for s in shades] == pytest.approx(wanted, abs=0.005)  # CSS keeps 2 digits
    for shade, value in zip(shades, VALUES, strict=True):
        if np.isfinite(value) and value != 0:
            assert shade["rgb"] == (NEGATIVE if value < 0 else POSITIVE)
    assert shades[4]["alpha"] == 0 and "not" not in shades[4]["title"]  # NaN: plain
    assert [s["title"] for s in shades] == list(shaded.notes)
    assert page.locator(".nnw-shaded-caption").text_content() == "Δ logit of ␣Paris"


def test_the_strongest_are_listed_and_a_click_selects(page):
    listed = page.locator(".nnw-shaded-item")
    assert listed.all_text_contents() == ["␣<b>Eiffel</b> @1 −3.00", "␣Tower @2 +1.50", "␣the @6 −1.00"]
    listed.nth(1).click()
    assert page.evaluate("() => [model.get('selected'), saved]") == [2, [2]]
    assert [s["selected"] for s in page.evaluate(SHADES)].index(True) == 2
    page.locator(".nnw-shaded-token").nth(5).click()
    assert page.evaluate("() => model.get('selected')") == 5
    body = page.locator(".nnw-shaded-body")
    body.focus()
    body.press("ArrowLeft")
    assert page.evaluate("() => model.get('selected')") == 4
    page.evaluate("() => model.pySet('selected', 0)")  # the explorer's selection, from Python
    assert [s["selected"] for s in page.evaluate(SHADES)].index(True) == 0


def test_token_text_is_text(page):
    assert page.locator("#host b").count() == 0  # the markup in a token is shown as text
    page.evaluate("() => window.cleanup()")
    page.evaluate("() => model.pySet('caption', 'gone')")  # no listener left: nothing redrawn
    assert page.locator(".nnw-shaded-caption").text_content() == "Δ logit of ␣Paris"
