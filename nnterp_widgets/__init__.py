"""nnterp-widgets: explore an LLM's internals from a notebook, answered by one vLLM engine.

    from nnterp_widgets import Session, Explorer, plot
    session = Session.open()                        # the trained model, opened in the background
    Explorer(session)                               # the tree, attention and lens around one prompt
    plot(session.lens("The Eiffel Tower is in the city of", 0, 10).result())

``from nnterp_widgets import StandardizedVLLM, Unavailable`` are the names a seed snippet
imports from ``nnterp``. The engine's imports (vLLM, nnsight) load on first use.

The rule for ``__all__``: what a notebook builds or calls by name, the session (and its
`Job`), the engine, every view, and `plot`. The results and the engine-side functions
are in `nnterp_widgets.requests`, the figure builders in `nnterp_widgets.figures`.
"""

from __future__ import annotations

from typing import Any

from .errors import Unavailable

__all__ = [
    "AttentionView",
    "AttributionPanel",
    "ContributionPanel",
    "DatasetView",
    "Explorer",
    "GenerationView",
    "Job",
    "LogitLens",
    "ModuleTree",
    "OcclusionPanel",
    "PatchPanel",
    "Session",
    "StandardizedVLLM",
    "SteerPanel",
    "Unavailable",
    "plot",
]

_LAZY = {
    "StandardizedVLLM": "engine.standardized",
    "Session": "session",
    "Job": "session",
    "plot": "figures",
    "Explorer": "widgets.explorer",
    "ModuleTree": "widgets.tree",
    "AttentionView": "widgets.attention",
    "AttributionPanel": "widgets.attribution",
    "ContributionPanel": "widgets.contributions",
    "DatasetView": "widgets.dataset",
    "GenerationView": "widgets.generation",
    "LogitLens": "widgets.lens",
    "OcclusionPanel": "widgets.occlusion",
    "PatchPanel": "widgets.patching",
    "SteerPanel": "widgets.steering",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'nnterp_widgets' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
