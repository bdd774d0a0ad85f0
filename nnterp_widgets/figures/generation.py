"""The pictures of a generation and of the lens modes: pure functions to plotly figures.

`generation_lens_figure` is the logit lens with one column per generation step (the
column's label is the token that step wrote; the step shown is outlined);
`lens_mode_figure` draws a `LensModes` in one of its modes (`MODES`: the top-1's
probability, a followed token's probability or rank, the entropy). Token text follows
the rules of :mod:`.figures`: escaped by `escape_token`, in data arrays only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from ..requests.generation import MODES, GenerationResult, LensModes
from .common import CELL_TEXT_CHARS, COLORSCALE, MAX_TICK_LABELS, PROBABILITY_FORMAT, escape_token
from .lens import lens_figure, lens_layout

__all__ = ["MODE_STYLES", "STEP_AXIS", "ModeStyle", "generation_lens_figure", "lens_mode_figure"]

#: The column axis of a generation's figures: one column per step.
STEP_AXIS = "step (the token it wrote)"


@dataclass(frozen=True)
class ModeStyle:
    """How a lens mode is drawn: its title (``{target}`` is the followed token), the
    colour bar's title, and whether the scale is reversed (so that the confident end,
    high probability, rank 1, low entropy, is the same bright colour in every mode)."""

    title: str
    colorbar: str
    reverse: bool = False


MODE_STYLES = {
    "top-1": ModeStyle("logit lens: top-1 probability", "top-1 p"),
    "probability": ModeStyle("logit lens: probability of {target}", "p"),
    "rank": ModeStyle("logit lens: rank of {target} (1 = top-1)", "rank", reverse=True),
    "entropy": ModeStyle("logit lens: entropy (nats)", "entropy", reverse=True),
}


def generation_lens_figure(result: GenerationResult, step: int | None = None) -> go.Figure:
    """The lens of every step: layers (rows) x steps (columns), ``step``'s column outlined.

    Each cell is the top-1 of ``project_on_vocab(layer_output)`` at the step's position,
    coloured by its probability; a column's label is the token its step wrote (greedy:
    the last row's top-1). Hover: the layer, the step, its token and the top-k.
    """
    count = len(result.steps)
    selected = -1 if step is None else result.step(step).index
    fig = lens_figure(result.lens, selected)
    k = result.steps[0].lens_ids.shape[-1]
    lines = "".join(
        f"<br>%{{customdata[{2 + i}]}}  %{{customdata[{2 + k + i}]:{PROBABILITY_FORMAT}}}" for i in range(k)
    )
    fig.update_traces(
        hovertemplate="%{customdata[0]}, step %{x:d}, which wrote %{customdata[1]}" + lines + "<extra></extra>",
        name="generation lens",
    )
    shown = "" if selected < 0 else f" (step {selected}: {'the prefill' if selected == 0 else 'a decode step'})"
    fig.update_layout(
        title=dict(text=f"generation lens: top-1 per layer and step{shown}"),
        xaxis_title=dict(text=STEP_AXIS),
        uirevision=f"generation:{count}:{result.lens.num_layers}",
    )
    for shape in fig.layout.shapes:
        shape.name = "step"
    return fig


def _cell_texts(modes: LensModes, mode: str, values: np.ndarray) -> list[list[str]]:
    if mode == "top-1":
        return [[escape_token(text, CELL_TEXT_CHARS) for text in row] for row in modes.top_texts]
    if mode == "rank":
        return [[str(int(v)) for v in row] for row in values]
    return [[f"{v:.2f}" for v in row] for row in values]


def _value_texts(mode: str, values: np.ndarray) -> np.ndarray:
    if mode == "rank":
        return np.vectorize(lambda v: str(int(v)), otypes=[object])(values)
    return np.vectorize(lambda v: f"{v:.4f}", otypes=[object])(values)


def lens_mode_figure(
    modes: LensModes, mode: str = "top-1", selected: int = -1, axis_title: str = "position"
) -> go.Figure:
    """``modes`` in ``mode``: layers (rows, ``layers[0]`` on top) x columns.

    Colour: the top-1's or the target's probability (0..1), the target's rank on a log
    scale (1 at the bright end), or the entropy (0, certain, at the bright end). Cell
    labels: the top-1 token in ``"top-1"`` mode, else the number. Hover:
    ``customdata[l][c] = [layer, column token, top-1 text, top-1 probability, value]``.
    ``selected >= 0`` outlines that column; ``axis_title`` names the columns (a
    generation's are its steps).
    """
    values = modes.values(mode)  # raises for an unknown mode, or a target mode without one
    style = MODE_STYLES[mode]
    layers, count = values.shape
    colour = dict(colorscale=COLORSCALE, reversescale=style.reverse)
    if mode == "rank":
        z = np.log10(values.astype(np.float32))
        top = max(1.0, float(z.max()))
        decades = list(range(0, math.floor(top) + 1))
        colour.update(
            zmin=0.0,
            zmax=top,
            colorbar=dict(
                title=dict(text=style.colorbar),
                thickness=12,
                tickvals=decades,
                ticktext=[f"{10**d:,}" for d in decades],
            ),
        )
    elif mode == "entropy":
        z = values.astype(np.float32)
        colour.update(
            zmin=0.0, zmax=max(1e-6, float(z.max())), colorbar=dict(title=dict(text=style.colorbar), thickness=12)
        )
    else:
        z = values.astype(np.float32)
        colour.update(zmin=0.0, zmax=1.0, colorbar=dict(title=dict(text=style.colorbar), thickness=12))
    labels = [escape_token(text) for text in modes.columns.texts]
    layer_labels = modes.layer_labels
    customdata = np.empty((layers, count, 5), dtype=object)
    customdata[:, :, 0] = np.array(layer_labels, dtype=object)[:, None]
    customdata[:, :, 1] = np.array(labels, dtype=object)[None, :]
    customdata[:, :, 2] = np.vectorize(escape_token, otypes=[object])(np.array(modes.top_texts, dtype=object))
    customdata[:, :, 3] = _value_texts("top-1", modes.top_probs)
    customdata[:, :, 4] = _value_texts(mode, values)
    what = MODES[mode]
    heatmap = go.Heatmap(
        z=np.ascontiguousarray(z, dtype=np.float32),
        x=np.arange(count, dtype=np.int32),
        y=np.arange(layers, dtype=np.int32),
        text=_cell_texts(modes, mode, values),
        texttemplate="%{text}" if count <= MAX_TICK_LABELS else "",
        textfont=dict(size=10),
        customdata=customdata,
        hovertemplate=(
            "%{customdata[0]}, column %{x:d}: %{customdata[1]}<br>"
            "top-1 %{customdata[2]}  %{customdata[3]}<br>" + what + " %{customdata[4]}<extra></extra>"
        ),
        name=f"lens: {mode}",
        **colour,
    )
    target = escape_token(modes.target.text) if modes.target is not None else ""
    layout = lens_layout(
        labels,
        modes.layer_labels,
        selected,
        title=style.title.format(target=target),
        axis_title=axis_title,
        revision=f"modes-{mode}",
    )
    return go.Figure(data=[heatmap], layout=layout)
