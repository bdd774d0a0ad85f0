"""The interventions' pictures: pure functions from their data to plotly figures.

    fig = patch_figure(result, selected=2)        # a PatchResult: layers x positions / heads
    fig = pair_figure(pair)                       # a PairLens: the lens difference

Their HTML page is the export's (`export.patch_section`, `export.export_patch_html`).

As in :mod:`.figures`: token text reaches a figure only escaped by `escape_token` and only
in data arrays (``ticktext``, ``customdata``), never in a template; axes are numeric so a
repeated token is two columns; layers[0] is the top row, as in the lens.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ..interventions.patching import PairLens, PatchResult
from .common import FIGURE_WIDTH, effect_heatmap, escape_token, selection_shapes, token_axis

__all__ = ["PAIR_NAMES", "pair_figure", "patch_figure"]

# The effect's colours (EFFECT_COLORSCALE): blue where a patch moves the metric away from
# clean, red towards it.


def _layer_axis(layers: int) -> dict:
    return dict(
        tickmode="array",
        tickvals=list(range(layers)),
        ticktext=[f"layers[{i}]" for i in range(layers)],
        autorange="reversed",
        showgrid=False,
        zeroline=False,
    )


def _symmetric(z: np.ndarray) -> float:
    """The colour range's half width: at least 1, so the clean end point has a colour."""
    finite = np.abs(z[np.isfinite(z)])
    return float(max(1.0, finite.max() if finite.size else 1.0))


def _layers_figure(heatmap: go.Heatmap, title: str, xaxis: dict, selected: int, revision: str) -> go.Figure:
    """A layers x columns map: ``layers[0]`` on top, column ``selected`` outlined."""
    layers, columns = np.asarray(heatmap.z).shape
    layout = dict(
        title=dict(text=title, font=dict(size=13)),
        xaxis=xaxis,
        yaxis=_layer_axis(layers),
        shapes=selection_shapes(columns, selected, row=False, column=True, rows=layers),
        uirevision=revision,
        width=FIGURE_WIDTH,
        height=max(300, 34 * layers + 200),
        margin=dict(l=90, r=20, t=60, b=90),
        hovermode="closest",
    )
    return go.Figure(data=[heatmap], layout=layout)


def patch_figure(result: PatchResult, selected: int = -1) -> go.Figure:
    """The effect map: layers (rows) x positions, or x heads for ``attention_head_outputs``.

    Cell colour: ``effect`` (1 = the clean run's metric restored, 0 = unchanged). Hover:
    ``customdata[l][c] = [layer label, column label (escaped), patched metric, clean
    metric, corrupted metric]``, the effect being (patched − corrupted) / (clean − corrupted).
    ``selected >= 0`` outlines that column (a position, or a head).
    """
    z = np.ascontiguousarray(result.effect, dtype=np.float32)
    layers, columns = z.shape
    # Heads are labelled by the figure itself; only token text needs escaping.
    labels = result.column_labels() if result.per_head else [escape_token(t) for t in result.column_labels()]
    customdata = np.empty((layers, columns, 5), dtype=object)
    customdata[:, :, 0] = np.array([f"layers[{i}]" for i in range(layers)], dtype=object)[:, None]
    customdata[:, :, 1] = np.array(labels, dtype=object)[None, :]
    customdata[:, :, 2] = result.patched.astype(np.float64)
    customdata[:, :, 3] = float(result.clean_metric)
    customdata[:, :, 4] = float(result.corrupted_metric)
    axis_name = "head" if result.per_head else "position"
    metric = result.metric_label(escape_token)
    span = _symmetric(z)
    heatmap = effect_heatmap(
        z,
        span,
        "effect",
        customdata=customdata,
        hovertemplate=(
            f"%{{customdata[0]}}, {axis_name} %{{x:d}}: %{{customdata[1]}}"
            "<br>effect %{z:.3f}<br>patched metric %{customdata[2]:.4f}"
            "<br>clean %{customdata[3]:.4f}, corrupted %{customdata[4]:.4f}<extra></extra>"
        ),
        name="patching effect",
    )
    xaxis = (
        dict(
            tickmode="array",
            tickvals=list(range(columns)),
            ticktext=labels,
            showgrid=False,
            zeroline=False,
            title=dict(text="head"),
        )
        if result.per_head
        else token_axis(labels, title=dict(text="position (clean prompt)"))
    )
    what = (
        f"patching {result.site}" if result.subject is None else f"causal tracing ({result.corruption}), {result.site}"
    )
    title = f"{what}: effect on {metric} (clean {result.clean_metric:.3f}, corrupted {result.corrupted_metric:.3f})"
    return _layers_figure(heatmap, title, xaxis, selected, f"patch:{result.site}:{layers}:{columns}")


#: What the patching panel calls its two prompts (its boxes' names), in the pair's lens too.
PAIR_NAMES = ("clean", "corrupted")


def pair_figure(pair: PairLens, selected: int = -1, names: tuple[str, str] = ("first", "second")) -> go.Figure:
    """The lens difference: per layer and position, first - second of the lens's
    logit(answer) - logit(foil), the two prompts called ``names`` (the patching panel's
    "clean" and "corrupted"). Hover: ``customdata = [layer, first's token, second's
    token, first's value, second's value]``."""
    one, two = (escape_token(name) for name in names)
    z = np.ascontiguousarray(pair.difference, dtype=np.float32)
    layers, count = z.shape
    first = [escape_token(text) for text in pair.first.tokens.texts]
    second = [escape_token(text) for text in pair.second.tokens.texts]
    customdata = np.empty((layers, count, 5), dtype=object)
    customdata[:, :, 0] = np.array([f"layers[{i}]" for i in range(layers)], dtype=object)[:, None]
    customdata[:, :, 1] = np.array(first, dtype=object)[None, :]
    customdata[:, :, 2] = np.array(second, dtype=object)[None, :]
    customdata[:, :, 3] = pair.first_diff.astype(np.float64)
    customdata[:, :, 4] = pair.second_diff.astype(np.float64)
    span = _symmetric(z)
    heatmap = effect_heatmap(
        z,
        span,
        f"{one} − {two}",
        customdata=customdata,
        hovertemplate=(
            "%{customdata[0]}, position %{x:d}: %{customdata[1]} | %{customdata[2]}"
            f"<br>{one} %{{customdata[3]:.3f}}, {two} %{{customdata[4]:.3f}}"
            "<br>difference %{z:.3f}<extra></extra>"
        ),
        name="lens difference",
    )
    metric = f"logit({escape_token(pair.answer_text)}) − logit({escape_token(pair.foil_text)})"
    xaxis = token_axis(first, title=dict(text=f"position ({one})"))
    return _layers_figure(heatmap, f"lens of {metric}: {one} − {two}", xaxis, selected, f"pair:{layers}:{count}")
