"""Attribution's picture: a pure function from an `Attribution` to a plotly figure.

    fig = attribution_figure(attribution, selected=(23, 4))

Two heatmaps sharing the layer axis (layers[0] on top, as in the lens): each head's
direct effect on the metric (layers x heads), and beside it each block's MLP and the
attention projection's bias. One diverging scale, white at 0, symmetric, shared by both,
so a head and an MLP of the same effect have the same colour. Token text reaches the
figure only through `escape_token`, in the title's data.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..requests.attribution import Attribution
from .common import EFFECT_COLORSCALE, escape_token

__all__ = ["BLOCK_COLUMNS", "attribution_figure"]

#: The columns of the right-hand map: per block, what is not a head.
BLOCK_COLUMNS = ("MLP", "attn bias")


def _half_width(*arrays: np.ndarray) -> float:
    values = np.concatenate([np.abs(a[np.isfinite(a)]).ravel() for a in arrays])
    return float(values.max()) if values.size and values.max() > 0 else 1.0


def attribution_figure(attribution: Attribution, selected: tuple[int, int] | None = None) -> go.Figure:
    """Heads (layers x heads) and the blocks' MLP and bias effects, on one colour scale.

    Hover: the layer, the head (or part) and its direct effect on the metric. ``selected``
    outlines that ``(layer, head)``. Where the family cannot split its heads, the head map
    is empty and its title says why.
    """
    heads = np.asarray(attribution.heads, dtype=np.float64)
    blocks = np.stack([attribution.mlps, attribution.attention_bias], axis=1)
    layers, count = heads.shape
    half = _half_width(heads, blocks)
    fig = make_subplots(
        rows=1,
        cols=2,
        shared_yaxes=True,
        column_widths=[max(0.5, count / (count + 3)), 1 - max(0.5, count / (count + 3))],
        horizontal_spacing=0.04,
        subplot_titles=("heads" if attribution.heads_reason is None else "heads: not served", "blocks"),
    )
    common = dict(colorscale=EFFECT_COLORSCALE, zmid=0.0, zmin=-half, zmax=half, xgap=1, ygap=1)
    layer_labels = [f"layers[{i}]" for i in range(layers)]
    fig.add_trace(
        go.Heatmap(
            z=heads,
            x=list(range(count)),
            y=list(range(layers)),
            customdata=np.array([[[layer_labels[l], f"head {h}"] for h in range(count)] for l in range(layers)]),
            hovertemplate="%{customdata[0]} · %{customdata[1]}<br>direct effect %{z:+.4f}<extra></extra>",
            colorbar=dict(title="effect", thickness=12),
            **common,
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Heatmap(
            z=blocks,
            x=list(range(len(BLOCK_COLUMNS))),
            y=list(range(layers)),
            customdata=np.array([[[layer_labels[l], part] for part in BLOCK_COLUMNS] for l in range(layers)]),
            hovertemplate="%{customdata[0]} · %{customdata[1]}<br>direct effect %{z:+.4f}<extra></extra>",
            showscale=False,
            **common,
        ),
        row=1,
        col=2,
    )
    answer = escape_token(attribution.answer_text)
    foil = escape_token(attribution.foil_text) if attribution.foil is not None else None
    metric = f"logit({answer})" + (f" − logit({foil})" if foil is not None else "")
    rest = attribution.embedding + attribution.norm_bias + attribution.head_bias
    fig.update_layout(
        title=dict(
            text=f"direct effect on {metric} = {attribution.metric:.3f} (embedding and final biases: {rest:+.3f})",
            font=dict(size=13),
        ),
        height=max(320, 16 * layers + 120),
        width=min(900, 140 + 34 * (count + 3)),
        margin=dict(l=80, r=20, t=70, b=40),
        yaxis=dict(
            tickmode="array", tickvals=list(range(layers)), ticktext=layer_labels, autorange="reversed", showgrid=False
        ),
        xaxis=dict(
            tickmode="array", tickvals=list(range(count)), ticktext=[str(h) for h in range(count)], title="head"
        ),
        xaxis2=dict(tickmode="array", tickvals=[0, 1], ticktext=list(BLOCK_COLUMNS)),
        uirevision="attribution",
    )
    if attribution.heads_reason is not None:
        fig.add_annotation(
            text=attribution.heads_reason, xref="x domain", yref="y domain", x=0.5, y=0.5, showarrow=False
        )
    if selected is not None and 0 <= selected[0] < layers and 0 <= selected[1] < count:
        layer, head = selected
        fig.add_shape(
            type="rect",
            x0=head - 0.5,
            x1=head + 0.5,
            y0=layer - 0.5,
            y1=layer + 0.5,
            xref="x",
            yref="y",
            line=dict(color="black", width=2),
            name="selected head",
        )
    return fig
