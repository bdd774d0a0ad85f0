"""Engines for the tests: real vLLM (CPU backend) + real nnsight, on tiny checkpoints.

One engine per test module (module-scoped fixtures), closed when the module is done
so that the next module's engine has the machine to itself. A module that goes through
many engines in turn (every family) opens the next while testing the current one
(`EnginesAhead`): an engine's start is mostly waiting on its processes' imports.

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

import concurrent.futures
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
ENGINE_FIXTURES = frozenset(
    {"engine", "engine_factory", "engines", "session", "trained_session", "gemma_session", "kernel_env", "lab"}
)
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


class EnginesAhead:
    """Opens the engines of ``families`` in turn, the next ``depth`` ahead of the one in
    use: ``take(name)`` returns ``name``'s engine (or raises what opening it raised) and
    keeps the following families' engines opening on threads. An engine's start is
    mostly its two processes importing vLLM, one core at a time, and a family's tests
    take a few seconds, so two starts at once keep both cores busy. At most ``depth + 1``
    engines are open at once."""

    def __init__(self, families, depth: int = 2, opener=None) -> None:
        self.families = list(families)
        self.depth = depth
        self.opener = opener or open_engine
        for name in self.families:  # on this thread: a checkpoint's seeded init stays as it is
            checkpoint(name)
        self._ahead: list[tuple[str, concurrent.futures.Future]] = []
        self._pool = concurrent.futures.ThreadPoolExecutor(depth, thread_name_prefix="engine-ahead")

    def take(self, name: str):
        if self._ahead and self._ahead[0][0] == name:
            future = self._ahead.pop(0)[1]
        else:  # not the order expected: start over from here
            self._drop()
            future = self._pool.submit(self.opener, name)
        index = self.families.index(name) if name in self.families else len(self.families)
        for following in self.families[index + 1 + len(self._ahead) : index + 1 + self.depth]:
            self._ahead.append((following, self._pool.submit(self.opener, following)))
        return future.result()

    def _drop(self) -> None:
        for _, future in self._ahead:
            _close_when_opened(future)
        self._ahead = []

    def close(self) -> None:
        self._drop()
        self._pool.shutdown(wait=True)


def _close_when_opened(future) -> None:
    try:
        future.result().close()
    except Exception:  # noqa: BLE001 - it failed to open: nothing to close
        pass


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


@pytest.fixture(scope="session", params=["qwen2", "gpt2"])
def engine(request):
    """A gated fused-pair model (qwen2), then a plain-stream one (gpt2); one open at a time.
    Session-scoped: the modules that use it (engine core, interior) run their tests on
    one qwen2 engine, then on one gpt2 engine, instead of opening both each. pytest
    closes the first when the second is asked for; the last is closed after the last
    test that uses it (`pytest_runtest_teardown`), not left idling to the session's end."""
    model = open_engine(request.param)
    model.family_name = request.param
    _SHARED.append(model)
    yield model
    model.close()


#: The shared `engine` fixture's engines (closing one twice is harmless).
_SHARED: list = []


def _uses_shared_engine(item) -> bool:
    """Whether ``item`` uses this file's `engine` (a module's own ``engine`` is defined in
    the module, whose id ends in ``.py``)."""
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.get("engine") if info is not None else None
    return bool(defs) and not defs[-1].baseid.endswith(".py")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    if _uses_shared_engine(item) and (nextitem is None or not _uses_shared_engine(nextitem)):
        while _SHARED:
            _SHARED.pop().close()


def open_session(family: str, max_model_len: int = 64, **settings):
    """A session on a tiny checkpoint, engine open; short prompts keep tests quick. Its
    engine runs where a user's would (in this process on the CPU) unless ``settings``
    say otherwise (``in_process=False``)."""
    from nnterp_widgets.session import Session

    settings = {**{k: v for k, v in ENGINE_KWARGS.items() if k != "max_model_len"}, **settings}
    return Session.open(checkpoint(family), progress=False, max_model_len=max_model_len, **settings).wait()


@pytest.fixture(scope="module")
def session(request):
    """The module's session: on its ``SESSION_FAMILY`` (default the gated qwen2), with
    its ``SESSION_SETTINGS`` (engine arguments) if it has some."""
    opened = open_session(
        getattr(request.module, "SESSION_FAMILY", "qwen2"), **getattr(request.module, "SESSION_SETTINGS", {})
    )
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
