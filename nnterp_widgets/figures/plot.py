"""`plot(result)`: any result as the figure its view draws, in one line.

    from nnterp_widgets import plot
    plot(session.lens("The Eiffel Tower is in the city of", 0, 10).result())   # the lens
    plot(session.occlude(prompt, " Paris").result(), measure="probability")

Each result type has one figure (the one its view shows); ``options`` are that figure
builder's own (``head=`` for a pattern, ``selected_token=``, ``threshold=`` for the
contribution graph, ``mode=`` for lens modes, ...). Returns a ``plotly.graph_objects.Figure``:
it shows itself in a notebook, and ``.write_html(path)`` saves it.
"""

from __future__ import annotations

from typing import Any, Callable

import plotly.graph_objects as go

from ..interventions import Occlusion, PairLens, PatchResult
from ..requests import (
    THRESHOLD,
    AttentionPattern,
    Attribution,
    Contributions,
    GenerationResult,
    LensGrid,
    LensModes,
    PromptResult,
    Results,
)
from .attention import attention_figure
from .attribution import attribution_figure
from .causal import occlusion_figure
from .contributions import contribution_figure, route_picture
from .generation import generation_lens_figure, lens_mode_figure
from .lens import lens_figure
from .patching import pair_figure, patch_figure
from .dataset import dataset_figure, dataset_table


def _contributions(result: Contributions, threshold: float = THRESHOLD, target: int = -1) -> go.Figure:
    return contribution_figure(route_picture(result, threshold, target))


def _attention(result: AttentionPattern, head: int = 0, selected_token: int = -1) -> go.Figure:
    return attention_figure(result, head, selected_token)


def _modes(result: LensModes, mode: str = "top-1", selected: int = -1) -> go.Figure:
    return lens_mode_figure(result, mode, selected)


#: Each result type's figure: the builder its view uses.
FIGURES: dict[type, Callable[..., go.Figure]] = {
    PromptResult: lambda result, **options: lens_figure(result.lens, **options),
    LensGrid: lens_figure,
    AttentionPattern: _attention,
    GenerationResult: generation_lens_figure,
    LensModes: _modes,
    PatchResult: patch_figure,
    PairLens: pair_figure,
    Attribution: attribution_figure,
    Contributions: _contributions,
    Occlusion: occlusion_figure,
    Results: lambda result, **options: dataset_figure(dataset_table(result, **options)),
}


def plot(result: Any, **options: Any) -> go.Figure:
    """The figure of ``result`` (see the module's docstring).

    Args:
        result: a result of a session request (a `Job`'s ``result()``).
        options: the figure builder's own options.

    Returns:
        A plotly figure.

    Raises:
        TypeError: for anything that is not a result with a figure.
    """
    for kind, build in FIGURES.items():
        if isinstance(result, kind):
            return build(result, **options)
    names = ", ".join(kind.__name__ for kind in FIGURES)
    raise TypeError(f"plot draws a result of a session request ({names}); got {type(result).__name__}")
