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


def test_stderr_into_sends_descriptor_2_and_pythons_stream_to_the_file_then_gives_them_back(tmp_path, capfd):
    import os

    from nnterp_widgets.session.engine_log import stderr_into

    import sys

    log = tmp_path / "engine.log"
    with stderr_into(log):
        os.write(2, b"from C++ or an engine process\n")
        print("a progress bar", file=sys.stderr)  # Python's stream (warnings too): in a kernel, not fd 2
    os.write(2, b"after\n")
    print("after, in Python", file=sys.stderr)
    written = log.read_text()
    assert "from C++ or an engine process\n" in written and "a progress bar\n" in written
    assert capfd.readouterr().err == "after\nafter, in Python\n"


def test_the_demo_prints_only_its_own_lines():
    """A real engine (the tiny qwen2 checkpoint) in a fresh process: what reaches the
    terminal is the demo's own report; vLLM's lines are in its log."""
    import re
    import subprocess
    import sys

    import os

    # As from a fresh terminal: no vLLM logging settings (a session earlier in this
    # process routed vLLM's logs, and a child would inherit that as the caller's choice).
    env = {key: value for key, value in os.environ.items() if not key.startswith("VLLM_LOGGING")}
    env.pop("VLLM_CONFIGURE_LOGGING", None)
    done = subprocess.run(
        [sys.executable, "-m", "nnterp_widgets", "demo", "--checkpoint", "qwen2", "--prompt", "The Eiffel Tower is"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = (done.stdout + done.stderr).splitlines()
    own = re.compile(r"^(opening StandardizedVLLM on |support\(\):|  \w|\s+'|logit lens of |L\d|$)")
    assert [line for line in lines if not own.match(line)] == []
    log = re.search(r"vLLM's log: (\S+)\)", lines[0]).group(1)
    assert "INFO" in open(log, encoding="utf-8").read()  # vLLM said its piece, there
