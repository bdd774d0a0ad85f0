"""Where the package's checkpoints are cached."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """Where checkpoints are cached: ``$NNTERP_WIDGETS_CACHE`` or ``~/.cache/nnterp_widgets``."""
    root = os.environ.get("NNTERP_WIDGETS_CACHE")
    base = Path(root) if root else Path.home() / ".cache" / "nnterp_widgets"
    return base / "checkpoints"
