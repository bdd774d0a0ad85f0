"""The static export in Chromium, offline: the widget's own JS renders the saved tree.

The page is opened from a file with every request off the page refused; the prompt's
tokens are the shared token table's texts, so the chips the export shows are held to the
same cases as the Python formatter and the JS.
"""

from __future__ import annotations

import contextlib
import html

import pytest

from browser_support import require_browser
from conftest import TOKEN_CASES
from nnterp_widgets.figures.html import patch_section
from nnterp_widgets.widgets.export import export_html
from nnterp_widgets.figures.common import escape_token
from test_export import REASON, synthetic_result, synthetic_tree

require_browser()

TEXTS = tuple(case["text"] for case in TOKEN_CASES)


@contextlib.contextmanager
def offline_page(browser, path):
    """The page at ``path`` with every request off the page refused; on leaving, no page
    error, no dialog and no request outside were seen."""
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    outside, errors, dialogs = [], [], []
    context.route(
        "**/*",
        lambda route: (
            route.continue_()
            if route.request.url.startswith("file:")
            else (outside.append(route.request.url), route.abort())
        ),
    )
    p = context.new_page()
    p.on("pageerror", lambda error: errors.append(str(error)))
    p.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    try:
        p.goto(path.as_uri())
        yield p
    finally:
        context.close()
    assert errors == [] and dialogs == [] and outside == [], (errors, dialogs, outside)


@pytest.fixture(scope="module")
def page(browser, tmp_path_factory):
    path = tmp_path_factory.mktemp("export") / "view.html"
    export_html(synthetic_result(TEXTS), synthetic_tree(), layer=1, head=0, selected_token=2, path=path)
    with offline_page(browser, path) as p:
        p.wait_for_selector(".nnw-mt [role=treeitem]", timeout=30_000)
        p.wait_for_selector("#nnw-lens .main-svg", timeout=30_000)
        yield p


def test_chips_follow_the_shared_table(page):
    chips = page.eval_on_selector_all(".nnw-mt-chip", "els => els.map(e => e.textContent)")
    assert chips == [case["shown"] for case in TOKEN_CASES]
    pressed = page.eval_on_selector_all(".nnw-mt-chip", "els => els.map(e => e.getAttribute('aria-pressed'))")
    assert pressed == ["true" if i == 2 else "false" for i in range(len(TEXTS))]


def test_tree_is_the_widgets(page):
    names = page.eval_on_selector_all("[role=treeitem] .nnw-mt-name", "els => els.map(e => e.textContent)")
    assert "layers[0..1]" in names and "layer_output" in names
    off = page.locator('[role=treeitem][data-key="v:model.model.layers.0.mlp.mlp_activation"]')
    assert off.get_attribute("aria-disabled") == "true"  # greyed, and says why, as in the notebook
    assert REASON in off.get_attribute("title")
    assert page.locator(".nnw-mt-type", has_text="Qwen2<b>MLP</b>").count() == 1  # markup is text (layers[1] folded)
    assert page.locator("img").count() == 0


def test_figures_drawn_with_the_same_labels(page):
    ticks = page.eval_on_selector_all("#nnw-lens .xtick text", "els => els.map(e => e.textContent)")
    assert ticks == [f"{i} {html.unescape(escape_token(t))}" for i, t in enumerate(TEXTS)]  # position, token
    assert page.locator("#nnw-attention .main-svg").count() >= 1


def test_the_token_view_shades_on_hover_in_the_page(page):
    # The saved selection (token 2) is shaded; a hover shades the hovered token's row; a
    # click selects there, with no kernel behind the page.
    tokens = page.locator("#nnw-att-text .nnw-att-token")
    assert tokens.all_text_contents() == [case["shown"] for case in TOKEN_CASES]
    queries = "() => [...document.querySelectorAll('#nnw-att-text .nnw-att-query')].map(s => s.dataset.index)"
    assert page.evaluate(queries) == ["2"]
    tokens.nth(4).hover()
    assert page.evaluate(queries) == ["4"] and tokens.nth(5).get_attribute("class").count("nnw-att-after") == 1
    assert tokens.nth(1).get_attribute("title").startswith("key 1: weight ")
    tokens.nth(4).click()
    page.mouse.move(5, 5)
    assert page.evaluate(queries) == ["4"]
    assert page.locator("#nnw-att-text img").count() == 0


def test_patching_section_renders_offline(browser, tmp_path):
    # The explorer's page with a sweep: the effect map and the pair's map drawn from the
    # page alone, the clean prompt's tokens as their labels (text: markup in one runs nothing).
    from test_patch_figures import pair, result

    sweep = result()
    path = tmp_path / "patch.html"
    section = patch_section(sweep, pair(), 1, plotlyjs=False)
    export_html(synthetic_result(), synthetic_tree(), selected_token=1, sections=[section], path=path)
    with offline_page(browser, path) as p:
        p.wait_for_selector("#nnw-patch .main-svg", timeout=30_000)
        p.wait_for_selector("#nnw-pair .main-svg", timeout=30_000)
        expected = [html.unescape(escape_token(t)) for t in sweep.clean.texts]
        for key in ("nnw-patch", "nnw-pair"):
            assert p.eval_on_selector_all(f"#{key} .xtick text", "els => els.map(e => e.textContent)") == expected
        assert p.locator("img").count() == 0
