"""The repository's habits: ruff's lint and format (configured in pyproject.toml) are clean."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _ruff(*args: str) -> subprocess.CompletedProcess:
    pytest.importorskip("ruff", reason="ruff not installed (pip install -e '.[test]')")
    from ruff.__main__ import find_ruff_bin

    return subprocess.run([find_ruff_bin(), *args], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_ruff_check_is_clean():
    done = _ruff("check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_is_clean():
    done = _ruff("format", "--no-cache", "--check", ".")
    assert done.returncode == 0, done.stdout + done.stderr
