"""The tour notebook in a real JupyterLab, driven like a person would, in Chromium.

A JupyterLab server on 127.0.0.1 (free port, a known token, root = a temp copy of
notebooks/, no news, no update check, no extension manager on the network) with this
venv's Python as the kernel (the venv's own ``python3`` kernelspec; no user-level ones). Chromium
(Debian's, via Playwright) opens ``tour.ipynb`` and runs Run → Run All Cells; one vLLM
engine starts in the kernel (~30 s). Then, in order:

* the explorer's module tree renders with standard names, and the greyed
  ``mlp_activation`` of the gated tiny model says why on hover;
* the attention heatmap and the lens render the prompt's tokens (the tour leaves the
  explorer on a prompt holding ``<img src=x onerror=alert(1)>``: it is text everywhere,
  no script runs, no ``img`` appears);
* typing a new prompt + Enter in the explorer's prompt box updates every panel;
* light and dark themes are both legible (text contrast >= 4.5 in the tree, plotly text
  visible on its figure);
* the explorer's static HTML export (written by the tour) renders offline.

Screenshots go to artifacts/screenshots/jupyterlab_*.png (git-ignored). The server, its
kernels (and their engine processes) and the browser are always shut down; every wait is
bounded.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from browser_support import CHROME_ARGS, CHROMIUM, CONTRAST_JS, REPO, SHOTS, require_browser
from nnterp_widgets.figures.tokens import show_token

sync_api = require_browser()
psutil = pytest.importorskip("psutil", reason="psutil not installed (pip install -e '.[test]')")
pytest.importorskip("jupyterlab", reason="jupyterlab not installed (pip install -e '.[notebook]')")

TOKEN = "nnterp-widgets-browser-test"
NOTEBOOK = "tour.ipynb"
EXPORT = "explorer_view.html"  # written by the tour's "save the view" cell
XSS = "<img src=x onerror=alert(1)>"
NOTEBOOK_PROMPT = "Paris <img src=x onerror=alert(1)> is"  # where the tour leaves the explorer
NEW_PROMPT = "The Colosseum is in Rome"
GATED_REASON = "a gated MLP on vLLM"

SERVER_START_S = 90
RUN_ALL_S = 480  # the trained model: engine start (~45 s), a 270-cell patching sweep (~17 s), every cell; generous for a loaded 2-core machine
PROMPT_S = 90  # one prompt: one engine request, then the panels redraw
STEP_MS = 30_000  # any other single wait

# Settings a person's JupyterLab would have after dismissing the first-run prompts, plus
# windowing off (all cells rendered, so off-screen outputs can be measured).
SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


# ------------------------------------------------------------------------ server, browser


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Lab:
    def __init__(self, base: str, root: Path, log: Path):
        self.base, self.root, self.log = base, root, log

    def url(self, path: str) -> str:
        return f"{self.base}{path}{'&' if '?' in path else '?'}token={TOKEN}"

    def api(self, path: str, method: str = "GET", timeout: float = 10):
        request = urllib.request.Request(self.url(path), method=method, headers={"Authorization": f"token {TOKEN}"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
        return json.loads(body) if body else None

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""


def _stop(proc: subprocess.Popen, lab: Lab | None) -> None:
    """Kernels shut down through the API, then the server; anything of theirs left is killed."""
    try:
        family = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        family = []
    if lab is not None and proc.poll() is None:
        try:
            for kernel in lab.api("/api/kernels") or []:
                lab.api(f"/api/kernels/{kernel['id']}", method="DELETE", timeout=60)
        except (OSError, urllib.error.URLError, ValueError):
            pass
        try:
            family += psutil.Process(proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            pass
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    gone, alive = psutil.wait_procs([p for p in family if p.is_running()], timeout=10)
    for leftover in alive:  # only processes this server started
        try:
            leftover.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=10)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    base = tmp_path_factory.mktemp("jupyterlab")
    root = base / "notebooks"
    shutil.copytree(REPO / "notebooks", root, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "*.html"))
    settings = base / "settings"
    for name, values in SETTINGS.items():
        path = settings / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    env = dict(os.environ)
    env.update(
        # No user-level kernelspecs or config: the only "python3" kernel is the venv's own
        # (its argv "python" becomes the server's sys.executable, this venv's interpreter).
        JUPYTER_DATA_DIR=str(base / "data"),
        JUPYTER_CONFIG_DIR=str(base / "config"),
        JUPYTER_RUNTIME_DIR=str(base / "runtime"),
        JUPYTER_PLATFORM_DIRS="1",
    )
    for name in ("JUPYTER_TOKEN", "JUPYTER_PATH"):
        env.pop(name, None)
    port = _free_port()
    command = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={TOKEN}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",
        f"--LabApp.user_settings_dir={settings}",
        f"--LabApp.workspaces_dir={base / 'workspaces'}",
        "--LabApp.expose_app_in_browser=True",
        *(["--allow-root"] if os.geteuid() == 0 else []),  # CI and this machine run as root
    ]
    log = base / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            command,
            env=env,
            cwd=root,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    server = Lab(f"http://127.0.0.1:{port}", root, log)
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"jupyter lab exited with {proc.returncode}:\n{server.log_tail()}")
            try:
                server.api("/api/status", timeout=5)
                break
            except (OSError, urllib.error.URLError):
                if time.monotonic() > deadline:
                    pytest.fail(f"jupyter lab did not answer within {SERVER_START_S} s:\n{server.log_tail()}")
                time.sleep(0.5)
        yield server
    finally:
        _stop(proc, server)


class Page:
    """The browser page plus what it reported: dialogs (dismissed), page errors, requests."""

    def __init__(self, page):
        self.page = page
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        self.outside: list[str] = []
        page.on("dialog", self._dialog)
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.on("request", self._request)

    def _dialog(self, dialog):
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    def _request(self, request):
        url = request.url
        if not url.startswith(("http://127.0.0.1", "ws://127.0.0.1", "data:", "blob:", "file:", "about:")):
            self.outside.append(url)


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    profile = tmp_path_factory.mktemp("chromium_profile")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(CHROMIUM),
            args=CHROME_ARGS,
            headless=True,
            viewport={"width": 1500, "height": 1100},
            device_scale_factor=1,
        )
        try:
            browser.set_default_timeout(STEP_MS)
            yield browser
        finally:
            browser.close()


# ------------------------------------------------------------------------ probes (JS)

# Every plotly figure in the explorer's output: title, trace types, drawn tick labels,
# and the contrast of its tick text (or title) against the figure's paper.
PLOTS_JS = """
(root) => [...root.querySelectorAll('.js-plotly-plot')].map(gd => {
  const fl = gd._fullLayout || {};
  const ticks = (sel) => [...gd.querySelectorAll(sel)].map(t => t.textContent);
  const parse = (c) => { const m = c.match(/rgba?\\(([^)]+)\\)/); if (!m) return null;
    const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number); return p.slice(0, 3); };
  const lum = (c) => { const [r, g, b] = c.map(v => { v /= 255;
    return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const tick = gd.querySelector('.xtick text') || gd.querySelector('.gtitle');
  let contrast = null;
  const paper = gd.querySelector('.main-svg');  // plotly paints the paper as this svg's background
  if (tick && paper) {
    const fg = parse(getComputedStyle(tick).fill);
    const bg = parse(getComputedStyle(paper).backgroundColor);
    if (fg && bg) { const a = lum(fg), b = lum(bg); contrast = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05); }
  }
  return {
    title: (fl.title && fl.title.text) || '',
    types: (gd.data || []).map(t => t.type),
    xticks: ticks('.xaxislayer-above .xtick text'),
    yticks: ticks('.yaxislayer-above .ytick text'),
    width: gd.getBoundingClientRect().width,
    height: gd.getBoundingClientRect().height,
    contrast,
  };
})
"""

CHIPS_JS = "(root) => [...root.querySelectorAll('.nnw-mt-chip')].map(c => c.textContent)"


# ------------------------------------------------------------------------ the tour


@pytest.fixture(scope="module")
def tour(lab, context):
    """tour.ipynb open in JupyterLab with every cell run."""
    page = Page(context.new_page())
    p = page.page
    p.goto(lab.url(f"/lab/tree/{NOTEBOOK}"), wait_until="domcontentloaded")
    p.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=60_000)
    # the notebook's own kernel (python3) started and connected: no kernel picker
    p.wait_for_function(
        """() => { const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
                   const kernel = panel && panel.sessionContext && panel.sessionContext.session
                                  && panel.sessionContext.session.kernel;
                   return !!document.querySelector('.jp-Dialog')
                          || (!!kernel && kernel.connectionStatus === 'connected' && kernel.status === 'idle'); }""",
        timeout=60_000,
        polling=250,
    )
    if p.locator(".jp-Dialog").count():
        SHOTS.mkdir(parents=True, exist_ok=True)
        p.screenshot(path=str(SHOTS / "jupyterlab_unexpected_dialog.png"))
        pytest.fail(
            f"JupyterLab asked before the tour ran: {p.locator('.jp-Dialog').first.text_content()!r}\n{lab.log_tail()}"
        )
    # Run → Run All Cells, as a person would
    p.locator(".lm-MenuBar-item", has_text="Run").first.click()
    p.locator('.lm-Menu-item[data-command="runmenu:run-all"]').click()
    try:
        p.wait_for_function(
            """() => {
              if (document.querySelector('.jp-Dialog')) return true;  // reported below
              const code = window.jupyterapp.shell.currentWidget.content.widgets.filter(c => c.model.type === 'code');
              return code.length > 0 && code.every(c => c.model.executionCount !== null)
                && [...document.querySelectorAll('.jp-Notebook .jp-InputPrompt')].every(e => !e.textContent.includes('*'));
            }""",
            timeout=RUN_ALL_S * 1000,
            polling=1000,
        )
    except sync_api.TimeoutError:
        SHOTS.mkdir(parents=True, exist_ok=True)
        p.screenshot(path=str(SHOTS / "jupyterlab_run_all_timeout.png"))
        pytest.fail(f"Run All did not finish within {RUN_ALL_S} s; server log:\n{lab.log_tail()}")
    dialog = p.locator(".jp-Dialog")
    if dialog.count():
        SHOTS.mkdir(parents=True, exist_ok=True)
        p.screenshot(path=str(SHOTS / "jupyterlab_unexpected_dialog.png"))
        pytest.fail(f"JupyterLab asked something while running the tour: {dialog.first.text_content()!r}")
    explorer = p.locator(".jp-OutputArea-output", has=p.locator(".nnw-mt")).first
    explorer.wait_for(timeout=STEP_MS)
    yield page, explorer
    p.close()


def notebook_of(sources) -> dict:
    """A notebook (nbformat 4, the python3 kernel) whose code cells are ``sources``."""
    cells = [
        {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source}
        for source in sources
    ]
    return {
        "cells": cells,
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def open_and_run_all(p, url: str) -> None:
    """Open the notebook at ``url``, wait for its own kernel to be idle, and run every
    cell (the command returns at once; the caller waits for what it needs)."""
    p.goto(url, wait_until="domcontentloaded")
    p.wait_for_function(
        """() => { const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
                   const kernel = panel && panel.sessionContext && panel.sessionContext.session
                                  && panel.sessionContext.session.kernel;
                   return !!kernel && kernel.connectionStatus === 'connected' && kernel.status === 'idle'; }""",
        timeout=60_000,
        polling=250,
    )
    p.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")


def _cell_errors(p) -> list[str]:
    return p.evaluate(
        """() => [...window.jupyterapp.shell.currentWidget.content.widgets]
              .filter(c => c.model.type === 'code')
              .flatMap(c => c.model.outputs.toJSON().filter(o => o.output_type === 'error'))
              .map(o => o.ename + ': ' + o.evalue)"""
    )


def _shot(locator, name: str) -> Path:
    """A screenshot of ``locator`` whole: the viewport grows to hold it (JupyterLab scrolls
    the notebook inside the page, so an element screenshot is otherwise cut to the window)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"jupyterlab_{name}.png"
    page = locator.page
    size = page.viewport_size
    height = locator.evaluate("e => e.getBoundingClientRect().height")
    page.set_viewport_size({"width": size["width"], "height": int(min(6000, max(size["height"], height + 200)))})
    try:
        locator.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(300)
        locator.screenshot(path=str(path))
    finally:
        page.set_viewport_size(size)
    return path


def _plots(explorer) -> dict:
    plots = explorer.evaluate(PLOTS_JS)
    named = {}
    for plot in plots:
        title = plot["title"]
        key = (
            "grid"
            if "all heads" in title
            else "lens"
            if "logit lens" in title
            else "attention"
            if title.startswith("layers[")
            else title
        )
        named[key] = plot
    return named


KERNEL_EXEC_JS = """async (code) => {
  const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  const out = [];
  const future = kernel.requestExecute({code, store_history: false, silent: false});
  // stdout and errors; not stderr, where the engine's progress bars go, whenever they come
  future.onIOPub = (msg) => { if (msg.content.text && msg.content.name !== 'stderr') out.push(msg.content.text);
                              if (msg.content.evalue) out.push(msg.content.ename + ': ' + msg.content.evalue); };
  await future.done;
  return out.join('');
}"""


def test_run_all_cells_without_errors(tour):
    page, explorer = tour
    # the kernel is this venv's interpreter
    assert page.page.evaluate(KERNEL_EXEC_JS, "import sys; print(sys.prefix, end='')") == sys.prefix
    assert _cell_errors(page.page) == []
    assert page.errors == [], page.errors
    assert page.outside == [], page.outside  # JupyterLab and the widgets called nothing outside


def test_module_tree_renders_standard_names(tour):
    page, explorer = tour
    rows = explorer.locator("[role=treeitem]")
    assert rows.count() > 10
    names = explorer.evaluate(
        "(root) => [...root.querySelectorAll('[role=treeitem] .nnw-mt-name')].map(e => e.textContent)"
    )
    for name in ("model", "layers[0]", "layers[0].mlp", "layers[0].self_attn", "mlp_output", "layer_output"):
        assert name in names, (name, names[:40])
    # shapes for the prompt on served values
    shapes = explorer.evaluate(
        "(root) => [...root.querySelectorAll('.nnw-mt-value .nnw-mt-shape')].map(e => e.textContent)"
    )
    assert any(s.startswith("[1, ") for s in shapes), shapes[:10]


def test_greyed_value_says_why_on_hover(tour):
    page, explorer = tour
    row = explorer.locator('[role=treeitem][data-key$="layers.0.mlp.mlp_activation"]')
    assert row.count() == 1
    row.hover()
    assert GATED_REASON in (row.get_attribute("title") or "")
    assert row.get_attribute("aria-disabled") == "true"
    row.click(force=True)  # aria-disabled: Playwright would wait; a person can click it
    assert GATED_REASON in explorer.locator(".nnw-mt-note").text_content()


def _kernel_tokens(p) -> list[str]:
    """The explorer's current token texts, asked of the kernel itself."""
    code = "import json; print(json.dumps(list(explorer.result.tokens.texts)), end='')"
    return json.loads(p.evaluate(KERNEL_EXEC_JS, code))


def test_heatmap_and_lens_show_the_prompt_tokens_as_text(tour):
    page, explorer = tour
    tokens = _kernel_tokens(page.page)
    assert "".join(tokens) == NOTEBOOK_PROMPT
    chips = explorer.evaluate(CHIPS_JS)
    assert chips == [show_token(t) for t in tokens]
    assert show_token(XSS) in "".join(chips)  # the markup, literally, in the tree's chips
    plots = _plots(explorer)
    assert {"attention", "grid", "lens"} <= set(plots), list(plots)
    assert "heatmap" in plots["attention"]["types"] and "heatmap" in plots["lens"]["types"]
    expected = [show_token(t) for t in tokens]  # the figures show tokens as the chips do
    assert plots["attention"]["xticks"] == expected
    assert plots["attention"]["yticks"] == expected
    assert plots["lens"]["xticks"] == [f"{i} {text}" for i, text in enumerate(expected)]  # position, token
    assert plots["lens"]["yticks"][0] == "layers[0]"


def test_markup_prompt_runs_no_script(tour):
    page, explorer = tour
    p = page.page
    p.wait_for_timeout(500)  # give an injected handler a chance to fire
    assert page.dialogs == []
    assert (
        p.evaluate("() => [...document.querySelectorAll('img')].filter(i => i.getAttribute('src') === 'x').length") == 0
    )
    assert explorer.locator("img").count() == 0
    assert show_token(XSS) in explorer.text_content()  # literally, somewhere a person reads it
    _shot(explorer, "xss")


def test_prompt_box_change_updates_every_panel(tour):
    page, explorer = tour
    p = page.page
    before = _plots(explorer)
    box = explorer.locator(".widget-text", has=p.locator("label", has_text="prompt")).locator("input")
    box.fill(NEW_PROMPT)
    box.press("Enter")
    p.wait_for_function(
        """([root, prompt]) => [...root.querySelectorAll('.nnw-mt-chip')].map(c => c.textContent)
                                 .join('').replaceAll('\u2423', ' ') === prompt""",
        arg=[explorer.element_handle(), NEW_PROMPT],
        timeout=PROMPT_S * 1000,
        polling=250,
    )
    tokens = _kernel_tokens(p)
    assert "".join(tokens) == NEW_PROMPT
    expected = [show_token(t) for t in tokens]
    assert explorer.evaluate(CHIPS_JS) == expected
    indexed = [f"{i} {text}" for i, text in enumerate(expected)]  # the lens's: position, token
    p.wait_for_function(
        """([root, ticks, indexed]) => {
              const drawn = [...root.querySelectorAll('.js-plotly-plot')].map(gd => JSON.stringify(
                [...gd.querySelectorAll('.xaxislayer-above .xtick text')].map(t => t.textContent)));
              return drawn.includes(JSON.stringify(ticks)) && drawn.includes(JSON.stringify(indexed));
            }""",
        arg=[explorer.element_handle(), expected, indexed],
        timeout=STEP_MS,
        polling=250,
    )
    after = _plots(explorer)
    assert after["attention"]["xticks"] == after["attention"]["yticks"] == expected
    assert after["lens"]["xticks"] == indexed
    assert after["attention"]["xticks"] != before["attention"]["xticks"]
    assert "heatmap" in after["attention"]["types"] and "heatmap" in after["lens"]["types"]
    _shot(explorer, "prompt_change")
    assert page.dialogs == [] and _cell_errors(p) == []


def _legibility(p, explorer, name: str) -> dict:
    results = {}
    for label, selector in {
        "served value": '[role=treeitem][data-key$="layers.0.mlp.mlp_output"] .nnw-mt-name',
        "value shape": '[role=treeitem][data-key$="layers.0.mlp.mlp_output"] .nnw-mt-shape',
        "node name": '[role=treeitem][data-key$="layers.0.mlp"] .nnw-mt-name',
        "node type": '[role=treeitem][data-key$="layers.0.mlp"] .nnw-mt-type',
        "greyed value": '[role=treeitem][data-key$="layers.0.mlp.mlp_activation"] .nnw-mt-name',
        "token chip": ".nnw-mt-chip",
        "filter box": ".nnw-mt-filter",
    }.items():
        handle = explorer.locator(selector).first.element_handle()
        results[label] = round(p.evaluate(CONTRAST_JS, handle)["ratio"], 2)
    low = {k: v for k, v in results.items() if v < 4.5}
    assert low == {}, f"{name}: text contrast below 4.5: {low} (all: {results})"
    plots = _plots(explorer)
    for key in ("attention", "lens"):
        plot = plots[key]
        assert plot["width"] > 200 and plot["height"] > 200, (name, key, plot)
        assert plot["contrast"] is not None and plot["contrast"] >= 4.5, (name, key, plot)
    return results


def _theme(p, theme: str, light: bool) -> None:
    p.evaluate("t => window.jupyterapp.commands.execute('apputils:change-theme', {theme: t})", theme)
    p.wait_for_function("l => document.body.dataset.jpThemeLight === l", arg=str(light).lower(), timeout=STEP_MS)
    p.wait_for_timeout(500)  # theme CSS variables settle


def test_light_and_dark_themes_are_legible(tour):
    page, explorer = tour
    p = page.page
    _theme(p, "JupyterLab Light", True)
    explorer.scroll_into_view_if_needed()
    light = _legibility(p, explorer, "light")
    _shot(explorer, "light")
    _theme(p, "JupyterLab Dark", False)
    dark = _legibility(p, explorer, "dark")
    _shot(explorer, "dark")
    bg = explorer.evaluate("(root) => getComputedStyle(root.querySelector('.nnw-mt')).backgroundColor")
    assert bg not in ("rgb(255, 255, 255)", "rgba(0, 0, 0, 0)"), bg  # the tree follows the theme
    _theme(p, "JupyterLab Light", True)
    print("contrast light", light, "dark", dark)


def test_static_export_renders_offline(lab, context, tour):
    path = lab.root / EXPORT
    assert path.is_file(), f"the tour wrote no {EXPORT}"
    text = path.read_text(encoding="utf-8")
    assert XSS not in text
    page = Page(context.new_page())
    p = page.page
    p.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort())
    try:
        p.goto(path.as_uri(), wait_until="load")
        p.wait_for_function("() => document.querySelectorAll('.js-plotly-plot .main-svg').length >= 2", timeout=STEP_MS)
        plots = p.evaluate(PLOTS_JS, p.locator("body").element_handle())
        # The attention view and the lens first; the tour's later panels (patching,
        # generation) follow them on the page.
        assert [plot["types"][0] for plot in plots[:2]] == ["heatmap", "heatmap"]
        # the widget's own JS drew the saved tree: the same chips, reasons and labels
        # the first tree (the tour shows the explorer again at its end: the same chips)
        chips = p.evaluate(
            "() => [...document.querySelector('.nnw-mt').querySelectorAll('.nnw-mt-chip')].map(c => c.textContent)"
        )
        assert "".join(chips) == show_token(NOTEBOOK_PROMPT)
        assert plots[0]["xticks"] == chips
        assert GATED_REASON in p.locator('.nnw-mt-off[title*="gated"]').first.get_attribute("title")
        assert p.locator("img").count() == 0 and page.dialogs == []
        assert page.outside == [] and page.errors == [], (page.outside, page.errors)
        SHOTS.mkdir(parents=True, exist_ok=True)
        p.screenshot(path=str(SHOTS / "jupyterlab_export.png"), full_page=True)
    finally:
        p.close()


# ------------------------------------------------------------------------ generation (issue 16)

#: A tool's button on the explorer's tool strip (ipywidgets' ToggleButtons).
TOOL_TAB = ".nnw-tool-strip button"
PATTERN_ROW = '[role=treeitem][data-key$="layers.0.self_attn.attention_probabilities"]'
GENERATE_S = 120  # one generation: one engine request, then the figure and the slider


def _wait_row(p, explorer, disabled) -> None:
    """Until the pattern's row (found anew each time: the tree re-renders its rows) has
    ``aria-disabled`` = ``disabled``."""
    p.wait_for_function(
        """([root, sel, want]) => {
             const row = root.querySelector(sel);
             return !!row && row.getAttribute('aria-disabled') === want;
           }""",
        arg=[explorer.element_handle(), PATTERN_ROW, disabled],
        timeout=STEP_MS,
        polling=250,
    )


def test_generate_step_to_a_decode_step_and_read_why_the_pattern_is_greyed(tour):
    from seed_text import SEED_DECODE

    page, explorer = tour
    p = page.page
    row = explorer.locator(PATTERN_ROW)
    assert row.count() == 1 and row.get_attribute("aria-disabled") != "true"  # served on the prompt
    explorer.locator(TOOL_TAB, has_text="generation").first.click()  # the tools are tabs
    explorer.locator("button", has_text="generate").first.click()
    slider = explorer.get_by_role("slider", name="step")  # labelled: its <label>
    assert slider.count() == 1
    p.wait_for_function(
        "(input) => !input.disabled && Number(input.max) >= 1",
        arg=slider.element_handle(),
        timeout=GENERATE_S * 1000,
        polling=250,
    )
    assert slider.input_value() == "0"
    slider.focus()  # focusable: arrow keys step it
    slider.press("ArrowRight")
    assert slider.input_value() == "1"
    p.wait_for_function(  # the kernel's caption for the step, read out by a screen reader
        "(input) => (input.getAttribute('aria-valuetext') || '').includes('step 1 of') "
        "&& input.getAttribute('aria-valuetext').includes('a decode step')",
        arg=slider.element_handle(),
        timeout=STEP_MS,
        polling=250,
    )
    _wait_row(p, explorer, "true")  # greyed
    row.hover()
    assert row.get_attribute("title") == SEED_DECODE  # the seed's decode reason, word for word
    row.click(force=True)
    assert SEED_DECODE in explorer.locator(".nnw-mt-note").text_content()
    # the attention view says which step its pattern is of
    p.wait_for_function(
        "(root) => [...root.querySelectorAll('.widget-label')].some(e => e.textContent.includes('not of step 1'))",
        arg=explorer.element_handle(),
        timeout=STEP_MS,
        polling=250,
    )
    note = explorer.locator(".widget-label", has_text="not of step 1")
    assert note.count() == 1 and "the pattern of the prefill (step 0)" in note.text_content()
    outlined = """(root) => JSON.stringify([...root.querySelectorAll('.js-plotly-plot')]
              .filter(gd => ((gd._fullLayout || {}).title || {}).text?.startsWith('generation lens'))
              .map(gd => (gd.layout.shapes || []).filter(s => s.name === 'step').map(s => (s.x0 + s.x1) / 2)))"""
    try:  # the step's column outlined in the generation lens
        p.wait_for_function(f"(root) => ({outlined})(root) === '[[1]]'", arg=explorer.element_handle(), timeout=STEP_MS)
    except sync_api.TimeoutError:
        pytest.fail(f"the generation lens outlines {p.evaluate(outlined, explorer.element_handle())}, not step 1")
    _shot(explorer, "generation_decode_step")
    slider.press("ArrowLeft")  # back to the prefill
    assert slider.input_value() == "0"
    _wait_row(p, explorer, None)  # served again
    assert SEED_DECODE not in (row.get_attribute("title") or "")
    assert page.dialogs == [] and page.errors == [] and _cell_errors(p) == []


# ------------------------------------------------------------------------ the lens's window

# 62 tokens on the tiny checkpoint, none repeating in sequence: longer than the lens's
# default window of 32, and every window's column labels differ from every other's.
LONG_PROMPT = (
    "One, two, three, four, five, six, seven, eight, nine, ten. Monday, Tuesday, Wednesday, "
    "Thursday, Friday, Saturday, Sunday. January, February, March, April, May, June, July, "
    "August, September, October, November, December. Spring, summer, autumn, winter; north, "
    "south, east, west."
)
LENS_AXIS_JS = """(root) => {
  const gd = [...root.querySelectorAll('.js-plotly-plot')]
    .find(g => ((g._fullLayout || {}).title || {}).text?.startsWith('logit lens'));
  return {ticks: [...gd.querySelectorAll('.xaxislayer-above .xtick text')].map(t => t.textContent),
          vals: Array.from(gd._fullLayout.xaxis.tickvals || [], Number)};
}"""
#: Printed before a kernel's JSON answer, so that what else the kernel printed is left out.
JSON_MARK = "\x1eJSON:"
FOCUS_JS = """() => { const e = document.activeElement, s = getComputedStyle(e);
  return {cls: e.className, label: e.getAttribute('aria-label'), style: s.outlineStyle,
          width: parseFloat(s.outlineWidth)}; }"""


def _kernel_json(p, code: str):
    out = p.evaluate(KERNEL_EXEC_JS, f"import json\nMARK = {JSON_MARK!r}\n{code}")
    try:  # the JSON after the mark: anything else printed around it is not part of it
        return json.JSONDecoder().raw_decode(out, out.rindex(JSON_MARK) + len(JSON_MARK))[0]
    except ValueError:  # no mark, or no JSON after it
        raise AssertionError(f"the kernel said: {out}") from None


def _lens_moves_to(p, explorer, start: int, stop: int) -> list[str]:
    """Wait until the explorer's lens shows positions start..stop-1; check its column labels
    (as drawn, text) are those of `session.lens` for that window; return them."""
    deadline = time.monotonic() + PROMPT_S
    while True:
        shown = _kernel_json(
            p, "print(MARK + json.dumps([explorer.lens.panel.start, explorer.lens.panel.stop]), end='')"
        )
        if shown == [start, stop]:
            break
        assert time.monotonic() < deadline, f"the lens shows {shown}, not [{start}, {stop}]"
        time.sleep(0.5)
    asked = _kernel_json(
        p,
        f"_w = session.lens(explorer.result.prompt, {start}, {stop}, key='browser-test').result(120)\n"
        "print(MARK + json.dumps([_w.start, _w.stop, [_w.tokens.texts[i] for i in _w.positions]]), end='')",
    )
    assert asked[:2] == [start, stop]
    expected = [f"{start + i} {show_token(text)}" for i, text in enumerate(asked[2])]  # position, token
    p.wait_for_function(
        f"([root, ticks]) => JSON.stringify(({LENS_AXIS_JS})(root).ticks) === JSON.stringify(ticks)",
        arg=[explorer.element_handle(), expected],
        timeout=STEP_MS,
        polling=250,
    )
    axis = explorer.evaluate(LENS_AXIS_JS)
    assert axis["ticks"] == expected and axis["vals"] == list(range(start, stop))
    thumb = explorer.locator(".nnw-pw-thumb")
    assert thumb.get_attribute("aria-valuenow") == str(start)
    assert thumb.get_attribute("aria-valuetext").startswith(f"positions {start}–{stop - 1} of ")
    return expected


def test_lens_window_moves_by_mouse_and_keyboard(tour):
    page, explorer = tour
    p = page.page
    box = explorer.locator(".widget-text", has=p.locator("label", has_text="prompt")).locator("input")
    box.fill(LONG_PROMPT)
    box.press("Enter")
    p.wait_for_function(
        """([root, prompt]) => [...root.querySelectorAll('.nnw-mt-chip')].map(c => c.textContent)
                                 .join('').replaceAll('\u2423', ' ') === prompt""",
        arg=[explorer.element_handle(), LONG_PROMPT],
        timeout=PROMPT_S * 1000,
        polling=250,
    )
    count = len(_kernel_tokens(p))
    width = 32  # the lens's default window
    assert count > 2 * width - 4, count
    control = explorer.locator(".nnw-pw")
    control.wait_for(state="visible", timeout=STEP_MS)
    thumb, earlier, later = (explorer.locator(f".nnw-pw-{part}") for part in ("thumb", "earlier", "later"))
    # labelled: the slider and both buttons have accessible names
    assert thumb.get_attribute("role") == "slider" and thumb.get_attribute("aria-label") == "lens positions"
    assert "earlier" in earlier.get_attribute("aria-label") and "later" in later.get_attribute("aria-label")
    last = count - width
    seen = [_lens_moves_to(p, explorer, last, count)]  # the last positions by default
    starts = [last, max(0, last - width), max(0, last - width) + 10, max(0, last - width) + 9, last, 0, 1, 2]
    starts += [min(last, 2 + width), 4]
    assert later.get_attribute("aria-disabled") == "true"

    # mouse: the ◀ button, then a drag of the thumb by 10 positions
    earlier.click()
    seen.append(_lens_moves_to(p, explorer, max(0, last - width), max(0, last - width) + width))
    start = max(0, last - width)
    track = explorer.locator(".nnw-pw-track").bounding_box()
    grip = thumb.bounding_box()
    x, y = grip["x"] + grip["width"] / 2, grip["y"] + grip["height"] / 2
    p.mouse.move(x, y)
    p.mouse.down()
    p.mouse.move(x + 10 * track["width"] / count, y, steps=8)
    p.mouse.up()
    start += 10
    seen.append(_lens_moves_to(p, explorer, start, start + width))

    # keyboard: Tab from the ◀ button reaches the slider, with a visible focus ring
    earlier.focus()
    focus = p.evaluate(FOCUS_JS)
    assert "nnw-pw-earlier" in focus["cls"] and focus["style"] != "none" and focus["width"] > 0, focus
    p.keyboard.press("Tab")
    focus = p.evaluate(FOCUS_JS)
    assert "nnw-pw-thumb" in focus["cls"] and focus["style"] != "none" and focus["width"] > 0, focus
    cell = "() => window.jupyterapp.shell.currentWidget.content.activeCellIndex"
    active = p.evaluate(cell)
    for key, moved in (("ArrowLeft", start - 1), ("End", last), ("Home", 0), ("ArrowRight", 1), ("ArrowUp", 2)):
        p.keyboard.press(key)
        seen.append(_lens_moves_to(p, explorer, moved, moved + width))
    assert p.evaluate(cell) == active  # the keys moved the window, not the notebook's cell
    p.keyboard.press("Tab")  # on to ▶; Enter on it moves a window later (clamped at the end)
    focus = p.evaluate(FOCUS_JS)
    assert "nnw-pw-later" in focus["cls"] and focus["style"] != "none" and focus["width"] > 0, focus
    p.keyboard.press("Enter")
    seen.append(_lens_moves_to(p, explorer, min(last, 2 + width), min(last, 2 + width) + width))
    assert p.evaluate("() => document.activeElement.classList.contains('nnw-pw-later')")  # focus stays
    # mouse: a click on the track (left of the thumb) centres the window there
    track = explorer.locator(".nnw-pw-track").bounding_box()
    p.mouse.click(track["x"] + (width // 2 + 4.25) / count * track["width"], track["y"] + track["height"] / 2)
    seen.append(_lens_moves_to(p, explorer, 4, 4 + width))
    # each window showed its own labels: as many different label rows as different windows
    assert len({tuple(labels) for labels in seen}) == len(set(starts)), starts
    _shot(explorer, "lens_window")
    assert page.dialogs == [] and _cell_errors(p) == [] and page.errors == [], page.errors


def open_notebook(lab, context, name: str, sources) -> tuple:
    """A notebook of ``sources`` written into the server's root, opened in a new page with
    every cell run (no cell error): ``(page, explorer)``, the explorer's output area."""
    (lab.root / name).write_text(json.dumps(notebook_of(sources)), encoding="utf-8")
    page = Page(context.new_page())
    p = page.page
    open_and_run_all(p, lab.url(f"/lab/tree/{name}"))
    p.wait_for_function(
        """() => { const cells = window.jupyterapp.shell.currentWidget.content.widgets;
                   return cells.every(c => c.model.executionCount !== null)
                     && [...document.querySelectorAll('.jp-Notebook .jp-InputPrompt')]
                          .every(e => !e.textContent.includes('*')); }""",
        timeout=RUN_ALL_S * 1000,
        polling=1000,
    )
    assert _cell_errors(p) == []
    explorer = p.locator(".jp-OutputArea-output", has=p.locator(".nnw-mt")).first
    explorer.wait_for(timeout=STEP_MS)
    return page, explorer


def close_notebook(page) -> None:
    """Close a page `open_notebook` opened; it showed no dialog and no error."""
    page.page.close()
    assert page.dialogs == [] and page.errors == [] and page.outside == [], (page.dialogs, page.errors, page.outside)
