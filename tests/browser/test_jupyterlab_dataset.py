"""The dataset view in a real JupyterLab (issue 38), clicked in Chromium on the trained model.

A notebook opens the explorer, asks the lens of 252 capital-city prompts in one batch
(`session.each`) and shows them in a `DatasetView`. As a person would: the table shows
every prompt but draws only the rows in view; a click on the metric's head sorts by it;
the filter box keeps one country's prompts; a click on a row opens that prompt in the
explorer (the kernel's prompt box and answer follow).
"""

from __future__ import annotations

import json

import pytest

from browser_support import require_browser
import test_jupyterlab_tour as tour
import tour_claims
from test_jupyterlab_tour import KERNEL_EXEC_JS

lab, context = tour.lab, tour.context

sync_api = require_browser()

NOTEBOOK = "dataset.ipynb"
SOURCE = [
    "from nnterp_widgets import DatasetView, Explorer\nfrom nnterp_widgets.session import Session\n\n"
    f"CAPITALS = {tour_claims.CAPITALS!r}\nTEMPLATES = {tour_claims.CAPITAL_TEMPLATES!r}\n"
    "prompts = [t.format(c) for c in CAPITALS for t in TEMPLATES]\n"
    "session = Session.open()\n"
    "explorer = Explorer(session, prompt=prompts[0])\nexplorer",
    "lens = session.each(prompts).prompt(window=1).result()\nview = DatasetView(lens, explorer=explorer)\nview",
]


def _kernel(p, code: str):
    return json.loads(p.evaluate(KERNEL_EXEC_JS, f"import json; print(json.dumps({code}), end='')"))


@pytest.fixture(scope="module")
def notebook(lab, context):
    page, explorer = tour.open_notebook(lab, context, NOTEBOOK, SOURCE)
    yield page, explorer
    tour.close_notebook(page)


def test_the_dataset_view_sorts_filters_and_opens_a_prompt_in_the_explorer(notebook):
    page, _ = notebook
    p = page.page
    table = p.locator(".nnw-ds").first
    table.wait_for(timeout=120_000)
    count = len(tour_claims.CAPITALS) * len(tour_claims.CAPITAL_TEMPLATES)
    assert f"{count} of {count} shown" in table.locator(".nnw-ds-caption").text_content()
    drawn = table.locator(".nnw-ds-body .nnw-ds-row").count()
    assert 0 < drawn < 60  # only the rows in view (and a few spare) are in the page
    # Sort by the metric, then the other way: the first row holds the largest.
    head = table.locator(".nnw-ds-head .nnw-ds-metric")
    head.click()
    head.click()
    assert "▼" in head.text_content()
    first = float(table.locator(".nnw-ds-body .nnw-ds-row .nnw-ds-metric").first.text_content())
    largest = _kernel(p, "max(float(r.lens.model_top_probs[0]) for r in lens)")
    assert first == pytest.approx(largest, abs=1e-3)
    # Filter by a country: its six prompts remain.
    table.locator(".nnw-ds-filter").fill("Japan")
    p.wait_for_function(
        "(el) => el.textContent.includes('6 of')", arg=table.locator(".nnw-ds-caption").element_handle()
    )
    rows = table.locator(".nnw-ds-body .nnw-ds-row")
    assert rows.count() == 6 and all("Japan" in rows.nth(i).text_content() for i in range(6))
    # A click on a row opens its prompt in the explorer.
    chosen = rows.nth(2)
    index = int(chosen.get_attribute("data-index"))
    chosen.click()
    p.wait_for_function("(el) => el.classList.contains('nnw-ds-selected')", arg=chosen.element_handle(), timeout=10_000)
    prompt = _kernel(p, f"[explorer.prompt_box.value, prompts[{index}], view.selected]")
    assert prompt[0] == prompt[1] and prompt[2] == index and "Japan" in prompt[0]
    answered = _kernel(p, "''.join(explorer.wait(120).tokens.texts)")
    assert answered == prompt[1]
    # The page turns dark: the table reports it, and the set's figure takes plotly's dark template.
    assert _kernel(p, "view.grid.theme") == "light"
    p.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
    p.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'", timeout=30_000)
    for _ in range(50):
        if _kernel(p, "view.grid.theme") == "dark":
            break
        p.wait_for_timeout(200)
    assert _kernel(p, "[view.grid.theme, view.figure.layout.template.layout.paper_bgcolor]") == [
        "dark",
        "rgb(17,17,17)",
    ]
    p.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'})")
    p.wait_for_function("() => document.body.dataset.jpThemeLight === 'true'", timeout=30_000)
