"""Long work in a real JupyterLab (issue 35), clicked in Chromium on the trained model.

A notebook opens the explorer on a ~312-token paragraph. In the occlusion tab, as a
person would: "occlude" starts it; the view's bar appears and moves (done / total,
elapsed, time left); the coarse row (every block occluded) is drawn before the answer is
whole; "stop" ends it (the kernel's job says cancelled); a new prompt is then answered.
"""

from __future__ import annotations

import json

import pytest

from browser_support import require_browser
import test_jupyterlab_tour as tour
from test_jupyterlab_tour import KERNEL_EXEC_JS

lab, context = tour.lab, tour.context

sync_api = require_browser()

NOTEBOOK = "long_work.ipynb"
SENTENCES = [
    "The Eiffel Tower is in Paris, the capital of France.",
    "It was built for the world's fair of 1889 and was the tallest structure of its time.",
    "The Colosseum is in Rome, where gladiators once fought before crowds of thousands.",
    "Visitors climb the tower's stairs or take the lift to the top, where the city spreads below.",
]
SOURCE = [
    "from nnterp_widgets import Explorer\nfrom nnterp_widgets.session import Session\n\n"
    f"SENTENCES = {SENTENCES!r}\n"
    "session = Session.open()\n"
    "tokenizer = session.wait().tokenizer()\n"
    "text = ''\n"
    "while len(tokenizer(text)['input_ids']) < 300:\n"
    "    text += ' ' + SENTENCES[len(text) % len(SENTENCES)]\n"
    "PARAGRAPH = text.strip() + ' The Eiffel Tower is in the city of'\n"
    "explorer = Explorer(session, prompt=PARAGRAPH)\nexplorer",
    "len(explorer.wait().tokens)",
]
BAR_S = 120  # the bar shows a job that has run a second; the first chunk lands within it


def _kernel(p, code: str):
    return json.loads(p.evaluate(KERNEL_EXEC_JS, f"import json; print(json.dumps({code}), end='')"))


@pytest.fixture(scope="module")
def notebook(lab, context):
    page, explorer = tour.open_notebook(lab, context, NOTEBOOK, SOURCE)
    yield page, explorer
    tour.close_notebook(page)


def test_an_occlusion_shows_its_bar_and_coarse_row_and_stops_and_the_next_prompt_is_answered(notebook):
    page, explorer = notebook
    p = page.page
    assert _kernel(p, "len(explorer.result.tokens)") > 300
    explorer.locator(tour.TOOL_TAB, has_text="occlusion").first.click()
    explorer.locator("button", has_text="occlude").first.click()
    # Each view has its bar, hidden until its job has run a second: the occlusion's shows.
    bar = explorer.locator(".nnw-job-bar >> visible=true").first
    bar.wait_for(state="attached", timeout=BAR_S * 1000)
    first = bar.text_content()
    # The bar moves: its label (done / total · elapsed) changes while the job runs.
    p.wait_for_function(
        "([el, was]) => el.textContent !== was", arg=[bar.element_handle(), first], timeout=30_000, polling=250
    )
    # The coarse answer: the prompt shaded, every position valued by its block, before the end.
    p.wait_for_function(
        """(root) => [...root.querySelectorAll('.nnw-shaded-token')].filter(s => s.style.backgroundColor).length > 300""",
        arg=explorer.element_handle(),
        timeout=BAR_S * 1000,
        polling=250,
    )
    coarse = _kernel(p, "[bool(explorer.occlusion.occlusion.blocks), explorer.occlusion.job_bar.job.done()]")
    assert coarse == [True, False]  # the coarse row is on screen, the job still runs
    bar.locator("button", has_text="stop").click()
    p.wait_for_function("(el) => getComputedStyle(el).display === 'none'", arg=bar.element_handle(), timeout=30_000)
    job = _kernel(p, "[explorer.occlusion.job_bar.job.cancelled(), list(explorer.occlusion.job_bar.job.progress)]")
    assert job[0] is True and job[1][0] < job[1][1]
    assert "stopped" in _kernel(p, "explorer.occlusion.status['message']")
    # The engine is free: a new prompt is answered.
    _kernel(p, "setattr(explorer.prompt_box, 'value', 'The Colosseum is in the city of') or 1")
    assert _kernel(p, "list(explorer.wait(120).tokens.texts)")[-1] == " of"
    tour._shot(explorer, "long_work_stopped")
