"""The contribution graph's picture: a `Route` becomes plain segments, then a figure.

    picture = route_picture(contributions, threshold=0.04)   # data: nodes and edges
    fig = contribution_figure(picture)                         # plotting, the last step

Tokens across, levels up (the embedding at the bottom, the stream after each block
above it), the prediction's position at the top. Only the positions on a route get a
column, spaced evenly; each run of positions between them is folded into one "…" column,
so a 2,000-token prompt whose routes touch twenty tokens draws twenty-odd columns. An edge into level ``l + 1`` is drawn
from level ``l``: from another position (an attention edge) or straight up (the
stream's own part). Its width and opacity grow with its share; hover (a marker at its
middle) names the edge and its share. A node's colour is the MLP's share of its stream.
Token text reaches the figure only through `escape_token`.
"""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from ..requests.contributions import Contributions
from .common import escape_token, tick_positions

__all__ = ["RoutePicture", "contribution_figure", "route_picture"]

#: Edges are drawn in this many width classes (one plotly trace each).
WIDTH_CLASSES = 5
#: Edge colours per kind.
EDGE_COLORS = {"attention": "rgba(31, 119, 180, {a})", "residual": "rgba(127, 127, 127, {a})"}


#: At most this many column labels are drawn (thinned evenly past it; hover names every node).
MOST_LABELS = 48


@dataclass(frozen=True)
class RoutePicture:
    """What the graph view draws: ``nodes`` ``(x, level, hover, mlp_share, position)`` and
    ``edges`` ``(x0, y0, x1, y1, share, kind, hover)`` in column coordinates, token
    labels (by position), ``columns`` (each position's column, a folded one its fold's),
    ``ticks`` ``(x, label)`` (a position's label, or "…k" for k folded positions) and
    the counts."""

    threshold: float
    target: int
    labels: tuple[str, ...]
    num_layers: int
    nodes: tuple[tuple[int, int, str, float, int], ...]
    edges: tuple[tuple[int, int, int, int, float, str, str], ...]
    columns: tuple[int, ...] = ()
    ticks: tuple[tuple[int, str], ...] = ()

    @property
    def width(self) -> int:
        """How many columns are drawn."""
        return max(self.columns, default=-1) + 1

    @property
    def summary(self) -> str:
        """The edge count, said the same way by the title and the view's status."""
        attention = sum(1 for edge in self.edges if edge[5] == "attention")
        return f"{len(self.edges)} edges ({attention} attention) of share ≥ {self.threshold:.0%}"


def fold_columns(count: int, on_route) -> tuple[tuple[int, ...], tuple[tuple[int, str], ...]]:
    """Each of ``count`` positions' column: the positions ``on_route`` one each, in order;
    every run of positions between them (or before or after) one "…" column. Returns the
    columns and the fold ticks ``(x, "…k")``."""
    kept = sorted(set(on_route))
    columns = [0] * count
    folds = []
    x, previous = 0, -1
    for position in [*kept, count]:
        if position > previous + 1:  # a run of positions without a node
            for folded in range(previous + 1, position):
                columns[folded] = x
            folds.append((x, f"…{position - previous - 1}"))
            x += 1
        if position < count:
            columns[position] = x
            x += 1
        previous = position
    return tuple(columns), tuple(folds)


def route_picture(contributions: Contributions, threshold: float, target: int = -1) -> RoutePicture:
    """The kept routes (`Contributions.graph`) as drawable nodes and edges."""
    route = contributions.graph(threshold, target)
    texts = contributions.tokens.texts
    labels = tuple(f"{escape_token(text, 12)}·{i}" for i, text in enumerate(texts))
    columns, folds = fold_columns(len(texts), [position for _, position in route.nodes])
    nodes = []
    for level, position in route.nodes:
        name = f"{labels[position]} · " + ("embedding" if level == 0 else f"after layers[{level - 1}]")
        mlp = float(route.mlp.get((level, position), 0.0))
        nodes.append((columns[position], level, f"{name}<br>MLP share {mlp:.1%}" if level else name, mlp, position))
    edges = []
    for layer, source, target_position, share, kind in route.edges:
        if kind == "attention":
            hover = f"layers[{layer}] attention: {labels[source]} → {labels[target_position]}<br>share {share:.1%}"
        else:
            hover = f"layers[{layer}] residual: {labels[source]} keeps<br>share {share:.1%}"
        edges.append((columns[source], layer, columns[target_position], layer + 1, share, kind, hover))
    on_route = sorted({position for _, position in route.nodes})
    shown = [on_route[i] for i in tick_positions(len(on_route), MOST_LABELS)]
    ticks = sorted([(columns[p], labels[p]) for p in shown] + list(folds))
    return RoutePicture(
        threshold=route.threshold,
        target=route.target,
        labels=labels,
        num_layers=contributions.num_layers,
        nodes=tuple(nodes),
        edges=tuple(edges),
        columns=columns,
        ticks=tuple(ticks),
    )


def _width_class(share: float, threshold: float) -> int:
    span = max(1e-9, 1.0 - threshold)
    return min(WIDTH_CLASSES - 1, int((share - threshold) / span * WIDTH_CLASSES))


def contribution_figure(picture: RoutePicture) -> go.Figure:
    """The graph view of ``picture``: edges by width class and kind, hover markers at
    their middles, nodes coloured by the MLP's share."""
    fig = go.Figure()
    for kind, color in EDGE_COLORS.items():
        for width in range(WIDTH_CLASSES):
            xs: list = []
            ys: list = []
            for x0, y0, x1, y1, share, edge_kind, _ in picture.edges:
                if edge_kind == kind and _width_class(share, picture.threshold) == width:
                    xs += [x0, x1, None]
                    ys += [y0, y1, None]
            if xs:
                fig.add_trace(
                    go.Scatter(
                        x=xs,
                        y=ys,
                        mode="lines",
                        line=dict(width=1 + 2 * width, color=color.format(a=0.35 + 0.15 * width)),
                        hoverinfo="skip",
                        showlegend=False,
                        name=f"{kind} edges",
                    )
                )
    if picture.edges:
        fig.add_trace(
            go.Scatter(
                x=[(e[0] + e[2]) / 2 for e in picture.edges],
                y=[(e[1] + e[3]) / 2 for e in picture.edges],
                mode="markers",
                marker=dict(size=8, opacity=0.0),
                hovertext=[e[6] for e in picture.edges],
                hoverinfo="text",
                showlegend=False,
                name="edge",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=[n[0] for n in picture.nodes],
            y=[n[1] for n in picture.nodes],
            mode="markers",
            marker=dict(
                size=9,
                color=[n[3] for n in picture.nodes],
                cmin=0.0,
                cmax=1.0,
                colorscale="Oranges",
                line=dict(width=1, color="#444"),
                colorbar=dict(title="MLP share", thickness=10, len=0.6),
            ),
            hovertext=[n[2] for n in picture.nodes],
            hoverinfo="text",
            showlegend=False,
            name="node",
        )
    )
    count = picture.width
    levels = picture.num_layers + 1
    level_ticks = tick_positions(levels, 16)
    fig.update_layout(
        title=dict(
            text=f"routes to {picture.labels[picture.target]}'s prediction: {picture.summary}",
            font=dict(size=13),
        ),
        height=max(360, 14 * levels + 140),
        margin=dict(l=110, r=20, t=50, b=90),
        xaxis=dict(
            tickmode="array",
            tickvals=[x for x, _ in picture.ticks],
            ticktext=[label for _, label in picture.ticks],
            tickangle=-60,
            range=[-0.5, count - 0.5],
            showgrid=False,
        ),
        yaxis=dict(
            tickmode="array",
            tickvals=level_ticks,
            ticktext=["embedding" if l == 0 else f"layers[{l - 1}]" for l in level_ticks],
            range=[-0.5, levels - 0.5],
            showgrid=False,
        ),
        # A drag zooms into a stretch of positions and layers; a double click goes back.
        dragmode="zoom",
        uirevision="contributions",
    )
    return fig
