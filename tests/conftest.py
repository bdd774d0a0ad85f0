"""Engines for the tests: real vLLM (CPU backend) + real nnsight, on tiny checkpoints.

One engine per test module (module-scoped fixtures), closed when the module is done
so that the next module's engine has the machine to itself.

Markers (registered in pyproject.toml) are applied here, so no test module has to
remember them: ``engine`` on every test that uses a fixture starting a vLLM engine
(:data:`ENGINE_FIXTURES`: here, in a kernel or in JupyterLab), ``browser`` on every test
under tests/browser/ or using the ``browser`` fixture (Chromium; the few elsewhere that
start their own carry the mark). ``-m "not engine and not browser"`` runs the rest.

``pytest --device=cuda`` runs the same tests on a CUDA build of vLLM, with the
transformers reference on the same GPU (`devices`); without a GPU every test is
skipped with the reason, and the default (``cpu``) is the CPU suite as it was.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import devices
from nnterp_widgets.checkpoints import checkpoint


def pytest_addoption(parser):
    parser.addoption(
        "--device",
        choices=devices.DEVICES,
        default=os.environ.get(devices.ENV, "cpu"),
        help="where the engine and the transformers reference run (cuda: the GPU run, docs/gpu.md)",
    )


def pytest_configure(config):
    devices.select(config.getoption("--device"))


ENGINE_KWARGS = dict(dtype="float32", gpu_memory_utilization=0.3, max_model_len=512)
#: The fixtures that start an engine: a test using one (even indirectly) is marked ``engine``.
ENGINE_FIXTURES = frozenset({"engine", "engine_factory", "engines", "session", "kernel_env", "lab"})
BROWSER_DIR = Path(__file__).resolve().parent / "browser"
#: The token display rule's cases (tests/token_cases.json), shared by every implementation's tests.
TOKEN_CASES = json.loads(Path(__file__).with_name("token_cases.json").read_text(encoding="utf-8"))["cases"]


def pytest_collection_modifyitems(config, items):
    for item in items:
        if ENGINE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.engine)
        if BROWSER_DIR in Path(str(item.fspath)).parents or "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
    reason = devices.missing()  # --device=cuda on a machine without one
    if reason:
        skip = pytest.mark.skip(reason=reason)
        for item in items:
            item.add_marker(skip)


def open_engine(family: str):
    from nnterp_widgets import StandardizedVLLM

    return StandardizedVLLM(checkpoint(family), **ENGINE_KWARGS)


@pytest.fixture(scope="module")
def engine_factory():
    """Opens engines for a module and closes them all when it ends."""
    opened = []

    def make(family: str):
        engine = open_engine(family)
        opened.append(engine)
        return engine

    yield make
    for engine in opened:
        engine.close()


@pytest.fixture(scope="module", params=["qwen2", "gpt2"])
def engine(request):
    """A gated fused-pair model (qwen2), then a plain-stream one (gpt2); one open at a time."""
    model = open_engine(request.param)
    model.family_name = request.param
    yield model
    model.close()


def open_session(family: str, max_model_len: int = 64):
    """A session on a tiny checkpoint, engine open; short prompts keep tests quick."""
    from nnterp_widgets.session import Session

    settings = {k: v for k, v in ENGINE_KWARGS.items() if k != "max_model_len"}
    return Session.open(checkpoint(family), progress=False, max_model_len=max_model_len, **settings).wait()


@pytest.fixture(scope="module")
def session(request):
    """The module's session: on its ``SESSION_FAMILY`` (default the gated qwen2)."""
    opened = open_session(getattr(request.module, "SESSION_FAMILY", "qwen2"))
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium through playwright, headless (skips where either is missing)."""
    from browser_support import CHROME_ARGS, CHROMIUM, require_browser

    sync_api = require_browser()
    with sync_api.sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROME_ARGS, headless=True)
        yield launched
        launched.close()
