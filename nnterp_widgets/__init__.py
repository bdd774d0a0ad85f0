"""nnterp-widgets: explore an LLM's internals from a notebook, answered by one vLLM engine.

``from nnterp_widgets import StandardizedVLLM, Unavailable`` — the names a seed snippet
imports from ``nnterp``. The engine's imports (vLLM, nnsight) load on first use.
"""

from __future__ import annotations

from typing import Any

from .errors import Unavailable

__all__ = [
    "AttentionView",
    "AttributionPanel",
    "ContributionPanel",
    "Explorer",
    "LogitLens",
    "ModuleTree",
    "PatchPanel",
    "Session",
    "StandardizedVLLM",
    "Unavailable",
]

_LAZY = {
    "StandardizedVLLM": "engine.standardized",
    "Session": "session",
    "Explorer": "widgets.explorer",
    "ModuleTree": "widgets.tree",
    "AttentionView": "widgets.attention",
    "AttributionPanel": "widgets.attribution",
    "ContributionPanel": "widgets.contributions",
    "LogitLens": "widgets.lens",
    "PatchPanel": "widgets.patching",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'nnterp_widgets' has no attribute {name!r}")
