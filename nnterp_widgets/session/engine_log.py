"""Where vLLM's own logs go: a file per kernel, not the notebook.

vLLM logs its start, its settings and every warning to the terminal, from this process
and from its engine processes; in a notebook that is a pink block under every cell that
waits. A session sends all of it (every process, INFO and up) to one file,
``~/.cache/nnterp_widgets/logs/vllm-<pid>.log``, and says where it is, with its last lines, when the
engine fails (`failure_note`). A caller who configured vLLM's logging keeps theirs::

    session = Session.open()
    print(session.log_path)        # the file to open when something looks wrong
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Iterator

from ..checkpoints.cache import cache_root

#: vLLM's own switches: a dictConfig file for its loggers, and whether it configures them.
CONFIG_PATH = "VLLM_LOGGING_CONFIG_PATH"
CONFIGURE = "VLLM_CONFIGURE_LOGGING"
#: How many of the log's last lines a failure message quotes.
TAIL_LINES = 12


def log_path() -> Path:
    """This kernel's vLLM log."""
    return cache_root().parent / "logs" / f"vllm-{os.getpid()}.log"


def route_engine_logs() -> Path | None:
    """Send vLLM's logs, from this process and the engine's (which inherit the
    environment), to `log_path`; returns it, or None where the caller configured
    vLLM's logging already (their choice wins). Set before an engine starts."""
    path = log_path()
    if os.environ.get(CONFIG_PATH) == str(path.with_suffix(".json")):
        return path  # routed by an earlier session of this kernel
    if os.environ.get(CONFIG_PATH) or os.environ.get(CONFIGURE) == "0":
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    config = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"}},
        "handlers": {"file": {"class": "logging.FileHandler", "filename": str(path), "formatter": "plain"}},
        "loggers": {"vllm": {"handlers": ["file"], "level": "INFO", "propagate": False}},
    }
    config_file = path.with_suffix(".json")
    config_file.write_text(json.dumps(config), encoding="utf-8")
    os.environ[CONFIG_PATH] = str(config_file)
    os.environ[CONFIGURE] = "1"
    _apply_now(config)
    return path


def _apply_now(config: dict) -> None:
    # vLLM configured its loggers when it was imported: if it is, configure them again.
    import sys
    from logging.config import dictConfig

    if "vllm" in sys.modules:
        dictConfig(config)


def failure_note(path: Path | None, lines: int = TAIL_LINES) -> str:
    """What to add to a failure's message: where vLLM's log is, and its last lines."""
    if path is None or not path.exists():
        return ""
    tail = path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
    return f"\nvLLM's log: {path}\n" + "\n".join(tail)


@contextlib.contextmanager
def stderr_into(path: Path | None) -> Iterator[None]:
    """The process's standard error appended to ``path`` for the duration: file descriptor
    2 (C++ warnings, and what the engine's processes started meanwhile inherit) and
    Python's ``sys.stderr`` (warnings, progress bars; in a kernel it is the cell's stream,
    not descriptor 2). For the engine's start, whose lines a terminal or a notebook cell
    should not show: a command-line program's run, a session's start in a kernel.
    ``None``: left as it is."""
    if path is None:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(path, "ab") as log, open(path, "a", encoding="utf-8") as text:
            os.dup2(log.fileno(), 2)
            try:
                with contextlib.redirect_stderr(text):
                    yield
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
    finally:
        os.close(saved)
