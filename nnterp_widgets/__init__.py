"""nnterp-widgets: explore an LLM's internals from a notebook, answered by one vLLM engine.

``from nnterp_widgets import StandardizedVLLM, Unavailable`` — the names a seed snippet
imports from ``nnterp``. The engine's imports (vLLM, nnsight) load on first use.
"""

from __future__ import annotations

from typing import Any

from .errors import Unavailable

__all__ = ["StandardizedVLLM", "Unavailable"]


def __getattr__(name: str) -> Any:
    if name == "StandardizedVLLM":
        from .engine.standardized import StandardizedVLLM

        return StandardizedVLLM
    raise AttributeError(f"module 'nnterp_widgets' has no attribute {name!r}")
