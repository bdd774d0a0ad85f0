"""Interventions in a real JupyterLab, clicked in Chromium (issue 17).

The tour test's server and browser (its ``lab`` and ``context`` fixtures) run a small
notebook, written into the server's root, that opens an explorer on the embedded tiny
checkpoint. Then, as a person would:

* "ablate mode" on, a click on head 1 of the head grid: the delta line appears, saying
  L0H1 and the kernel's own Δ; a click on head 2 changes it (L0H1, L0H2, the new Δ);
* "patch" in the patching panel: the effect map appears with the clean prompt's tokens as
  its column labels (text, as the chips show them), hover gives the numbers, and a click
  on a position column selects that token in the module tree.

Screenshots go to artifacts/screenshots/jupyterlab_interventions*.png (git-ignored).
"""

from __future__ import annotations

import json
import time

import pytest

from browser_support import require_browser
from nnterp_widgets.figures.tokens import show_token
import test_jupyterlab_tour as tour
from test_jupyterlab_tour import KERNEL_EXEC_JS, PLOTS_JS, STEP_MS

# The tour's JupyterLab server and Chromium, as this module's own fixtures.
lab, context = tour.lab, tour.context

sync_api = require_browser()

NOTEBOOK = "interventions.ipynb"
PROMPT = "The Eiffel Tower is in"
SOURCE = [
    "from nnterp_widgets import Explorer\nfrom nnterp_widgets.session import Session\n\n"
    f"explorer = Explorer(Session.open(), prompt={PROMPT!r})\nexplorer",
    "explorer.wait().tokens.texts",
]
SWEEP_S = 180  # the sweep (a few engine requests) and the pair's lens, on a loaded machine


def _kernel(p, code: str):
    """``code``'s printed JSON, run in the notebook's kernel."""
    return json.loads(p.evaluate(KERNEL_EXEC_JS, f"import json; print(json.dumps({code}), end='')"))


@pytest.fixture(scope="module")
def notebook(lab, context):
    page, explorer = tour.open_notebook(lab, context, NOTEBOOK, SOURCE)
    yield page, explorer
    tour.close_notebook(page)


def _plot(explorer, title_start: str):
    """The plotly figure whose title starts with ``title_start`` (its PLOTS_JS summary)."""
    return next((plot for plot in explorer.evaluate(PLOTS_JS) if plot["title"].startswith(title_start)), None)


def _figure(explorer, title_part: str):
    """The plotly figure whose title holds ``title_part`` (a locator)."""
    return explorer.locator(".js-plotly-plot").filter(has=explorer.page.locator(".gtitle", has_text=title_part))


def _subplot(explorer, title_part: str, subplot: str = "xy"):
    """The drag surface (where plotly takes clicks) of one subplot of that figure."""
    return _figure(explorer, title_part).locator(f'.nsewdrag[data-subplot="{subplot}"]').first


def _click(surface, x: float = 0.5) -> None:
    """Hover then click at ``x`` (a fraction of the width) across the middle of ``surface``:
    plotly reports a click on the point it is hovering."""
    box = surface.bounding_box()
    at = {"x": box["width"] * x, "y": box["height"] / 2}
    surface.hover(position=at)
    surface.page.wait_for_timeout(300)
    surface.click(position=at)


def _shot(explorer, name: str) -> None:
    tour._shot(explorer, f"interventions_{name}")  # the whole output, however tall


def test_toggling_heads_in_ablate_mode_changes_the_delta_line(notebook):
    page, explorer = notebook
    p = page.page
    explorer.locator("button", has_text="ablate mode").click()
    _click(_subplot(explorer, "all heads", "x2y2"))  # head 1 of the shown layer (0)
    p.wait_for_function(
        "(root) => root.textContent.includes('ablating L0H1:')",
        arg=explorer.element_handle(),
        timeout=SWEEP_S * 1000,
        polling=250,
    )
    first = _kernel(p, "[explorer.ablation_line.text, explorer.ablation.top1_delta, explorer.attention.head]")
    line, delta, head = first
    assert line in explorer.text_content() and f"{delta:+.4f}" in line
    assert head == 0  # in ablate mode a click toggles the head, it does not show it
    _click(_subplot(explorer, "all heads", "x3y3"))  # head 2
    p.wait_for_function(
        "(root) => root.textContent.includes('ablating L0H1, L0H2:')",
        arg=explorer.element_handle(),
        timeout=SWEEP_S * 1000,
        polling=250,
    )
    line2, delta2 = _kernel(p, "[explorer.ablation_line.text, explorer.ablation.top1_delta]")
    assert line2 != line and f"{delta2:+.4f}" in line2 and line2 in explorer.text_content()
    assert _kernel(p, "explorer.attention.ablated") == [[0, 1], [0, 2]]
    _shot(explorer, "ablation")
    explorer.locator("button", has_text="clear ablation").click()


def test_a_patching_sweep_draws_the_effect_map_with_token_labels(notebook):
    page, explorer = notebook
    p = page.page
    explorer.locator(tour.TOOL_TAB, has_text="patching").first.click()  # the tools are tabs
    button = explorer.get_by_role("button", name="patch", exact=True)  # not the "patching" tab
    asked = "explorer.patching._asked"  # how many sweeps the panel has asked for
    for _ in range(2):
        # The figures above may still be re-laying out after the last test's re-run: a
        # click during a layout shift can land beside the button. The kernel says
        # whether the panel got it; if not, the button is clicked once more.
        button.scroll_into_view_if_needed()
        button.click()
        deadline = time.monotonic() + STEP_MS / 1000
        while _kernel(p, asked) == 0 and time.monotonic() < deadline:
            p.wait_for_timeout(500)
        if _kernel(p, asked) > 0:
            break
    try:
        p.wait_for_function(
            # The map fills in as the sweep's rows land; the pair's lens comes with the last.
            """(root) => ['patching layer_output', 'lens of logit('].every(title =>
                  [...root.querySelectorAll('.js-plotly-plot')].some(gd =>
                      ((gd._fullLayout.title || {}).text || '').startsWith(title)))""",
            arg=explorer.element_handle(),
            timeout=SWEEP_S * 1000,
            polling=500,
        )
    except sync_api.TimeoutError:  # say what the page and the kernel show instead
        status = _kernel(p, f"[explorer.patching.status_label.value, {asked}, explorer.patching.result is not None]")
        titles = [plot["title"] for plot in explorer.evaluate(PLOTS_JS)]
        pytest.fail(
            f"no effect map after {SWEEP_S} s: panel status {status}, plots {titles}, page errors {page.errors}"
        )
    clean = _kernel(p, "list(explorer.patching.result.clean.texts)")
    plot = _plot(explorer, "patching layer_output")
    assert plot["types"] == ["heatmap"]
    assert plot["xticks"] == [show_token(t) for t in clean]  # token labels, as text
    assert plot["yticks"][0] == "layers[0]"
    assert _plot(explorer, "lens of logit(") is not None  # the pair's lens difference beside it
    status = _kernel(p, "explorer.patching.status_label.value")
    assert "engine requests" in status and status in explorer.text_content()
    # Hover gives the numbers; a click on a position column selects that token everywhere.
    surface = _subplot(explorer, "patching layer_output")
    box = surface.bounding_box()
    surface.hover(position={"x": box["width"] / 2, "y": box["height"] / 2})
    hover = _figure(explorer, "patching layer_output").locator(".hoverlayer .hovertext")
    hover.first.wait_for(timeout=STEP_MS)
    text = hover.first.text_content()
    assert "effect" in text and "patched metric" in text and "clean" in text and "corrupted" in text
    _click(surface, x=0.5)  # the middle column of an odd count
    middle = len(clean) // 2
    p.wait_for_function(
        "([root, i]) => root.querySelectorAll('.nnw-mt-chip')[i].getAttribute('aria-pressed') === 'true'",
        arg=[explorer.element_handle(), middle],
        timeout=STEP_MS,
        polling=250,
    )
    assert _kernel(p, "explorer.selected_token") == middle
    _shot(explorer, "patching")
