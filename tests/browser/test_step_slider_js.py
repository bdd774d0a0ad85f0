"""Browser test of the generation's step control (nnterp_widgets/js/step_slider.js) alone:
no kernel, no engine. The module runs in Chromium on a fake anywidget model; the test
checks it is a focusable, labelled range input that the arrow keys step, writing
``value`` back, and that it follows the model (``max``, ``disabled``, ``caption``)."""

from __future__ import annotations

import pytest

from browser_support import require_browser
from nnterp_widgets.widgets.assets import STEP_SLIDER_CSS, STEP_SLIDER_ESM
from nnterp_widgets.widgets.generation import step_caption

require_browser()

FAKE_MODEL = """
const state = { value: 0, max: 0, disabled: true, label: "step", caption: "" };
const listeners = {};
window.saved = [];
window.model = {
  get: (k) => state[k],
  set: (k, v) => { state[k] = v; },
  save_changes: () => window.saved.push(state.value),
  on: (e, f) => { (listeners[e] = listeners[e] || []).push(f); },
  off: (e, f) => { listeners[e] = (listeners[e] || []).filter((g) => g !== f); },
  send() {},
  pySet: (k, v) => { state[k] = v; (listeners["change:" + k] || []).forEach((f) => f()); },
};
window.cleanup = render({ model: window.model, el: document.getElementById("host") });
"""


@pytest.fixture()
def page(browser):
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.set_content('<!doctype html><html lang="en"><body><div id="host"></div></body></html>')
    page.add_style_tag(content=STEP_SLIDER_CSS.read_text(encoding="utf-8"))
    page.add_script_tag(content=STEP_SLIDER_ESM.read_text(encoding="utf-8") + FAKE_MODEL, type="module")
    page.wait_for_function("() => window.cleanup !== undefined")
    yield page
    assert errors == []
    page.close()


def test_arrow_keys_step_a_labelled_focusable_range(page):
    slider = page.get_by_role("slider", name="step")
    assert slider.count() == 1 and slider.is_disabled()  # no generation yet
    page.evaluate(
        f"() => {{ model.pySet('max', 4); model.pySet('disabled', false); model.pySet('caption', {step_caption(0, 4)!r}); }}"
    )
    slider.focus()
    assert page.evaluate("() => document.activeElement.type") == "range"
    slider.press("ArrowRight")
    slider.press("ArrowRight")
    assert slider.input_value() == "2" and page.evaluate("() => [model.get('value'), saved]") == [2, [1, 2]]
    slider.press("End")
    assert page.evaluate("() => model.get('value')") == 4
    slider.press("ArrowRight")  # past the last step: stays
    slider.press("Home")
    assert page.evaluate("() => model.get('value')") == 0
    assert slider.get_attribute("aria-valuetext") == step_caption(0, 4) == "step 0 of 4: the prefill"
    page.evaluate(f"() => {{ model.pySet('value', 3); model.pySet('caption', {step_caption(3, 4)!r}); }}")
    assert slider.input_value() == "3" and "decode" in slider.get_attribute("aria-valuetext")
    assert page.locator("output").text_content() == step_caption(3, 4)
    page.evaluate("() => window.cleanup()")
    assert page.locator("input").count() == 0
