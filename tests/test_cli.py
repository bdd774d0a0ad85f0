"""The command line: `nnterp-widgets` opens JupyterLab on notebooks/ with its options."""

from __future__ import annotations

import pytest

from nnterp_widgets import __main__ as cli


@pytest.fixture()
def launched(monkeypatch):
    calls = []
    monkeypatch.setattr(cli.subprocess, "call", lambda command, env=None: calls.append(command) or 0)
    monkeypatch.setattr("nnterp_widgets.checkpoints.trained", lambda *a, **k: None)
    return calls


def test_default_is_lab_with_options_passed_through(launched):
    assert cli.main(["--no-browser", "--port=8899"]) == 0
    (command,) = launched
    assert command[1:4] == ["-m", "jupyter", "lab"]
    assert command[4].endswith("notebooks")
    assert "--no-browser" in command and "--port=8899" in command


def test_demo_refuses_unknown_options():
    with pytest.raises(SystemExit):
        cli.main(["demo", "--no-such-option"])
