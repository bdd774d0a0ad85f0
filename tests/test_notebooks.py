"""Every notebook under notebooks/ runs top to bottom, headless, on this venv's kernel.

Each notebook is executed with nbclient in a temp copy of notebooks/ (so nothing is written
back into the repository) on a kernel whose interpreter is this test's own Python (a
kernelspec written to a temp dir and put first on JUPYTER_PATH), with a per-cell timeout;
any cell that raises fails the test, with the cell's source and traceback in the message.
The tour starts a vLLM engine (about 30 s on the CPU backend).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="nbformat not installed (pip install -e '.[test]')")
nbclient = pytest.importorskip("nbclient", reason="nbclient not installed (pip install -e '.[test]')")
pytest.importorskip("ipykernel", reason="ipykernel not installed (pip install -e '.[test]')")

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
CELL_TIMEOUT = 300
KERNEL = "nnterp-widgets-test"


@pytest.fixture(scope="module")
def kernel_env(tmp_path_factory, monkeypatch_module):
    """A kernelspec running ``sys.executable`` (this venv), first on JUPYTER_PATH."""
    data = tmp_path_factory.mktemp("jupyter_data")
    spec = data / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "nnterp-widgets test (venv)",
                "language": "python",
            }
        )
    )
    # As from a fresh terminal: an engine earlier in this process routed vLLM's logs, and
    # the kernel would inherit that as the caller's own choice (then not routing them).
    for name in ("VLLM_LOGGING_CONFIG_PATH", "VLLM_CONFIGURE_LOGGING"):
        monkeypatch_module.delenv(name, raising=False)
    monkeypatch_module.setenv(
        "JUPYTER_PATH", os.pathsep.join(filter(None, [str(data), os.environ.get("JUPYTER_PATH")]))
    )
    return KERNEL


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


#: What vLLM writes when its logs reach the notebook: its log lines' levels, its bars.
VLLM_NOISE = (" INFO ", " WARNING ", "Processed prompts", "Rendering prompts", "(EngineCore")


def _failure(cell, error) -> str:
    source = "".join(cell.get("source", ""))
    return f"cell failed:\n{source}\n\n{error}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, kernel_env, tmp_path):
    work = tmp_path / "notebooks"
    shutil.copytree(path.parent, work, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    nb = nbformat.read(work / path.name, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        kernel_name=kernel_env,
        timeout=CELL_TIMEOUT,
        startup_timeout=120,
        allow_errors=False,
        resources={"metadata": {"path": str(work)}},
    )
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as error:
        failed = next(
            (
                c
                for c in nb.cells
                if c.cell_type == "code" and any(o.get("output_type") == "error" for o in c.get("outputs", []))
            ),
            {},
        )
        pytest.fail(_failure(failed, error), pytrace=False)
    except nbclient.exceptions.CellTimeoutError as error:
        pytest.fail(f"a cell ran past {CELL_TIMEOUT} s: {error}", pytrace=False)
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"
    ]
    assert errors == []
    # vLLM's logs and progress bars go to the session's log file, not under the cells.
    noise = [
        o["text"]
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "stream" and o.get("name") == "stderr"
    ]
    assert not [text for text in noise if any(mark in text for mark in VLLM_NOISE)], noise
    if path.name == "tour.ipynb":  # the tour is quiet: nothing on stderr under any cell
        assert noise == [], noise

        # and it ends with the explorer in view: its last output is the first cell's explorer
        def views(cell) -> list:
            return [
                o["data"]["application/vnd.jupyter.widget-view+json"]["model_id"]
                for o in cell.get("outputs", [])
                if "application/vnd.jupyter.widget-view+json" in o.get("data", {})
            ]

        code = [c for c in nb.cells if c.cell_type == "code"]
        made = next(c for c in code if "".join(c.source).startswith("explorer = Explorer("))
        assert views(code[-1]) == views(made) != [], (views(code[-1]), views(made))
    # a notebook that ran produced something: every code cell got an execution count
    assert all(c.get("execution_count") for c in nb.cells if c.cell_type == "code" and "".join(c.source).strip())


def test_the_tour_makes_its_claims_on_the_tested_prompts():
    """The tour's claims are asserted in tests/test_trained_model.py on these prompts:
    the tour must say them about the same ones."""
    import tour_claims

    source = "".join(
        "".join(cell["source"]) for cell in json.loads((REPO / "notebooks" / "tour.ipynb").read_text())["cells"]
    )
    for name in ("CLEAN", "CORRUPTED", "ANSWER", "FOIL", "ROLES_TEXT", "GENERATE", "STEER_POSITIVE", "STEER_NEGATIVE"):
        assert repr(getattr(tour_claims, name)).strip("'") in source, name
    assert f"if {tour_claims.TOWER} in route.sources(" in source  # the route from ' Tower'
    assert "graph(threshold=0.04)" in source
    assert f"subject={tour_claims.NOISED}" in source  # causal tracing's noised span
    for country, capital in tour_claims.CAPITALS.items():  # over a dataset: the same prompts
        assert f"{country!r}: {capital!r}" in source, country
    for template in tour_claims.CAPITAL_TEMPLATES:
        assert repr(template) in source, template
