"""The explorer on the Qwen2.5-0.5B-shaped bench checkpoint at 512 tokens, in JupyterLab.

Opt-in (it loads the ~2 GB bench checkpoint, building it once into the cache, and a
prompt request there takes tens of seconds on a CPU): skipped unless
``NNTERP_WIDGETS_SCALE=1``. Run it alone, holding both engine slots on a shared machine:

    NNTERP_WIDGETS_SCALE=1 /work/slot --all .venv/bin/python -m pytest -q tests/browser/test_explorer_at_scale.py

A notebook opens a session on ``bench_checkpoint("qwen2_0.5b")`` and an `Explorer` on a
512-token prompt (bench/scale.py's text); the test checks what paints (512 token chips,
the 512 x 512 pattern, the lens over the last 32 positions with its window control),
saves artifacts/screenshots/jupyterlab_explorer_0.5b_512.png and a JSON summary beside
it, then moves the lens window with the keyboard (Home: one request at this size) and
checks the new column labels against ``session.lens``.
"""

from __future__ import annotations

import json
import os
import time

import nbformat
import pytest

from browser_support import REPO, SHOTS
import test_jupyterlab_tour as tour
from test_jupyterlab_tour import CHIPS_JS, LENS_AXIS_JS, Page, _cell_errors, _kernel_json, _plots, _shot
from nnterp_widgets.figures.tokens import show_token

# The tour's JupyterLab server and Chromium, as this module's own fixtures.
lab, context = tour.lab, tour.context

ENV = "NNTERP_WIDGETS_SCALE"
if os.environ.get(ENV) != "1":
    pytest.skip(f"the 0.5B-shape screenshot is opt-in: {ENV}=1 (loads a ~2 GB checkpoint)", allow_module_level=True)

TOKENS = 512
WINDOW = 32  # the lens's default window
NOTEBOOK = "explorer_at_scale.ipynb"
NAME = "explorer_0.5b_512"
RUN_ALL_S = 1200  # engine start on 2 GB of weights + one 512-token prompt request, on a loaded CPU
MOVE_S = 600

CELLS = [
    f"""import sys, time
sys.path.insert(0, {str(REPO / "bench")!r})
from scale import prompt_of  # the benchmark's text of exactly N tokens
from nnterp_widgets import Explorer
from nnterp_widgets.checkpoints import bench_checkpoint
from nnterp_widgets.session import Session

session = Session.open(bench_checkpoint("qwen2_0.5b"), dtype="float32", gpu_memory_utilization=0.3,
                       max_model_len={TOKENS + 64}).wait()""",
    f"""text = prompt_of(session.tokenizer(), {TOKENS})
started = time.perf_counter()
explorer = Explorer(session, prompt=text)
explorer""",
    """result = explorer.wait(900)
painted = time.perf_counter() - started
print(len(result.tokens), "tokens painted in", round(painted, 1), "s")""",
]


@pytest.fixture(scope="module")
def scaled(lab, context):
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    nbformat.write(notebook, str(lab.root / NOTEBOOK))
    page = Page(context.new_page())
    p = page.page
    p.goto(lab.url(f"/lab/tree/{NOTEBOOK}"), wait_until="domcontentloaded")
    p.wait_for_function(
        """() => { const k = window.jupyterapp && window.jupyterapp.shell.currentWidget
                     && window.jupyterapp.shell.currentWidget.sessionContext
                     && window.jupyterapp.shell.currentWidget.sessionContext.session
                     && window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
                   return !!k && k.connectionStatus === 'connected' && k.status === 'idle'; }""",
        timeout=90_000,
        polling=250,
    )
    p.locator(".lm-MenuBar-item", has_text="Run").first.click()
    p.locator('.lm-Menu-item[data-command="runmenu:run-all"]').click()
    p.wait_for_function(
        """() => { const code = window.jupyterapp.shell.currentWidget.content.widgets.filter(c => c.model.type === 'code');
                   return code.every(c => c.model.executionCount !== null)
                     && [...document.querySelectorAll('.jp-Notebook .jp-InputPrompt')].every(e => !e.textContent.includes('*')); }""",
        timeout=RUN_ALL_S * 1000,
        polling=2000,
    )
    assert _cell_errors(p) == [], lab.log_tail()
    explorer = p.locator(".jp-OutputArea-output", has=p.locator(".nnw-mt")).first
    explorer.wait_for(timeout=60_000)
    yield page, explorer
    p.close()


def test_explorer_paints_512_tokens_of_the_05b_shape(scaled):
    page, explorer = scaled
    p = page.page
    facts = _kernel_json(
        p,
        "print(MARK + json.dumps({'tokens': list(result.tokens.texts), 'painted_s': round(painted, 1),"
        " 'layers': result.lens.num_layers, 'heads': int(result.attention.quantized.shape[0]),"
        " 'window': [result.lens.start, result.lens.stop], 'engine_requests': session.engine_requests}), end='')",
    )
    tokens = facts["tokens"]
    assert len(tokens) == TOKENS and facts["layers"] == 24 and facts["heads"] == 14, {**facts, "tokens": len(tokens)}
    assert facts["window"] == [TOKENS - WINDOW, TOKENS]
    assert explorer.evaluate(CHIPS_JS) == [show_token(t) for t in tokens]
    # the browser draws the figures after the kernel has them (the 512 x 512 pattern takes a while)
    p.wait_for_function(
        """(root) => { const titles = [...root.querySelectorAll('.js-plotly-plot')]
                         .map(gd => ((gd._fullLayout || {}).title || {}).text || '');
                       return titles.some(t => t.startsWith('layers[') && !t.includes('all heads'))
                         && titles.some(t => t.includes('all heads')) && titles.some(t => t.startsWith('logit lens')); }""",
        arg=explorer.element_handle(),
        timeout=120_000,
        polling=500,
    )
    plots = _plots(explorer)
    assert {"attention", "grid", "lens"} <= set(plots), list(plots)
    lens = explorer.evaluate(LENS_AXIS_JS)
    assert lens["ticks"] == [show_token(t) for t in tokens[-WINDOW:]]
    assert lens["vals"] == list(range(TOKENS - WINDOW, TOKENS))
    thumb = explorer.locator(".nnw-pw-thumb")
    assert thumb.is_visible() and thumb.get_attribute("aria-valuenow") == str(TOKENS - WINDOW)
    shot = _shot(explorer, NAME)
    summary = {
        "checkpoint": 'bench_checkpoint("qwen2_0.5b"): Qwen2.5-0.5B shape, random weights, float32',
        "tokens": len(tokens),
        "painted_s": facts["painted_s"],
        "layers": facts["layers"],
        "heads": facts["heads"],
        "lens_window": facts["window"],
        "engine_requests_to_paint": facts["engine_requests"],
        "attention_figure_px": [round(plots["attention"]["width"]), round(plots["attention"]["height"])],
        "lens_figure_px": [round(plots["lens"]["width"]), round(plots["lens"]["height"])],
        "screenshot": shot.name,
        "screenshot_bytes": shot.stat().st_size,
    }
    # the window moved by keyboard at this size: Home, one request, the first positions' labels
    thumb.focus()
    p.keyboard.press("Home")
    started = time.monotonic()
    deadline = started + MOVE_S
    while _kernel_json(p, "print(MARK + json.dumps([explorer.lens.panel.start]), end='')") != [0]:
        assert time.monotonic() < deadline, "the lens window did not move to 0..31"
        time.sleep(1)
    summary["window_move_s"] = round(time.monotonic() - started, 1)
    asked = _kernel_json(
        p,
        f"_w = session.lens(result.prompt, 0, {WINDOW}, key='browser-test').result(60)\n"
        "print(MARK + json.dumps([_w.tokens.texts[i] for i in _w.positions]), end='')",
    )
    expected = [show_token(t) for t in asked]
    p.wait_for_function(
        f"([root, ticks]) => JSON.stringify(({LENS_AXIS_JS})(root).ticks) === JSON.stringify(ticks)",
        arg=[explorer.element_handle(), expected],
        timeout=60_000,
        polling=500,
    )
    (SHOTS / f"jupyterlab_{NAME}.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(summary, indent=2))
    assert page.dialogs == [] and page.errors == [], (page.dialogs, page.errors)
