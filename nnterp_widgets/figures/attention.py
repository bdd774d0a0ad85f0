"""The attention pattern's pictures: the heatmap of one head and the grid of every head.

    figure = attention_figure(pattern, head=0, selected_token=5)
    grid = head_grid_figure(pattern, shown=0)

The heatmaps' ``z`` are float32 numpy arrays, which plotly serialises as base64 typed
arrays. Hover text is per cell ``customdata`` up to :data:`HOVER_TEXT_MAX_TOKENS` tokens;
past that ``n²`` strings would be tens of MB, so the heatmap's own (hidden) axes carry
every position's text as ``ticktext`` and the hover's ``%{x}`` / ``%{y}`` show it, while
a second pair of overlaid axes draws the sparse visible tick labels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..requests.attention import AttentionPattern, mean_pool
from .common import (
    COLORSCALE,
    HIGHLIGHT,
    escape_token,
    selection_shapes,
    token_axis,
)


#: Up to this many tokens the attention hover text is per-cell ``customdata``.
HOVER_TEXT_MAX_TOKENS = 256


#: Sizes that put the tree, the heatmap with its head grid, and the lens on one screen
#: (JupyterLab's page in a 1600 x 1000 window: 1600 x 857): the heatmap's size, the head
#: grid's width.
ATTENTION_WIDTH = 430


ATTENTION_HEIGHT = 250


GRID_WIDTH = 300


#: The head grid: at least `GRID_COLS` columns, at most `GRID_ROWS` rows (more heads take
#: more, narrower columns: a 32-head layer is 3 rows of 11), so the grid and the token view
#: under it stay as tall as the heatmap beside them; square cells, `GRID_FRAME_PX` across
#: the margins; past `GRID_NAMED_COLS` columns a head's title is its number alone.
GRID_COLS = 5


GRID_NAMED_COLS = 4


GRID_ROWS = 3


GRID_FRAME_PX = 20


#: The head grid's height besides its rows: its title, the margins, the last row's title.
GRID_TITLES_PX = 58


#: The most token labels the heatmap draws a side, and their font: its plot area is about
#: 200 px, and a label at 10 px needs about 14 (more overlap; every token is in the hover).
ATTENTION_TICK_LABELS = 14


ATTENTION_TICK_FONT = 10


def attention_axes(panel: AttentionPattern) -> tuple[np.ndarray, np.ndarray]:
    """The attention heatmap's ``(y, x)`` coordinates: token positions where the cells are
    exact (a zoom window's start at its own), cell indices where they are pooled."""
    if panel.exact:
        return (
            np.arange(panel.query_start, panel.query_start + panel.rows, dtype=np.int32),
            np.arange(panel.key_start, panel.key_start + panel.cols, dtype=np.int32),
        )
    return np.arange(panel.rows, dtype=np.int32), np.arange(panel.cols, dtype=np.int32)


def block_label(panel: AttentionPattern, first: int, stop: int) -> str:
    """A pooled cell's side as hover text: ``"12..15 (␣the … ␣Paris)"`` (escaped)."""
    texts = panel.tokens.texts
    last = stop - 1
    if last == first:
        return f"{first} ({escape_token(texts[first])})"
    return f"{first}..{last} ({escape_token(texts[first])} … {escape_token(texts[last])})"


def attention_selection(panel: AttentionPattern, selected: int) -> list[dict]:
    """Outlines of query row and key column ``selected`` (a token position) on ``panel``'s
    heatmap: the cell row / column holding it, where the cells cover it."""
    count = len(panel.tokens)
    if panel.exact and panel.whole:
        return selection_shapes(count, selected, row=True, column=True)
    if selected < 0:
        return []
    if selected >= count:
        raise IndexError(f"selected token {selected} is out of range: the prompt has positions 0..{count - 1}")
    ys, xs = attention_axes(panel)
    line = dict(color=HIGHLIGHT, width=2)
    common = dict(type="rect", xref="x", yref="y", layer="above", line=line, fillcolor="rgba(0,0,0,0)")
    shapes = []
    row, col = panel.query_cell(selected), panel.key_cell(selected)
    if row is not None:
        y = int(ys[row])
        shapes.append(dict(common, name="selected row", x0=xs[0] - 0.5, x1=xs[-1] + 0.5, y0=y - 0.5, y1=y + 0.5))
    if col is not None:
        x = int(xs[col])
        shapes.append(dict(common, name="selected column", x0=x - 0.5, x1=x + 0.5, y0=ys[0] - 0.5, y1=ys[-1] + 0.5))
    return [{k: (int(v) if isinstance(v, np.integer) else v) for k, v in shape.items()} for shape in shapes]


#: The smallest top of a head's colour scale (a near-uniform head stays dark, not noisy).
SCALE_FLOOR = 0.05


def head_scale(weights: np.ndarray, first_key: bool) -> float:
    """The top of a head's colour scale: its largest weight off the first token's column
    when that column is shown (trained models park most weight on the first token, an
    attention sink; on a 0..1 scale every other cell is then the same dark), else its
    largest weight; at least `SCALE_FLOOR`. Cells above it (the sink) saturate."""
    rest = weights[:, 1:] if first_key and weights.shape[1] > 1 else weights
    top = float(rest.max()) if rest.size else 1.0
    return float(min(1.0, max(SCALE_FLOOR, top)))


def _drawn_axis(labels: Sequence[str], start: int, axis: str, title: str) -> dict:
    """The overlaid axis that draws the heatmap's sparse labels over its hidden ``axis``."""
    other = "y" if axis == "x" else "x"
    return token_axis(
        labels,
        start,
        ATTENTION_TICK_LABELS,
        tickfont=dict(size=ATTENTION_TICK_FONT),
        overlaying=axis,
        matches=axis,
        anchor=other,
        side="bottom" if axis == "x" else "left",
        title=dict(text=title),
    )


def attention_figure(panel: AttentionPattern, head: int, selected_token: int = -1) -> go.Figure:
    """Heatmap of one head's cells: query rows (the first on top) × key columns.

    Exact cells (``panel.block == 1``, the whole prompt or a zoom window) sit at their
    token positions; hover names the query token, the key token (with their positions)
    and the weight. Up to :data:`HOVER_TEXT_MAX_TOKENS` cells a side the texts are
    ``customdata[q][k] = [query text, key text]`` (escaped) and the weight is ``z``;
    past it see the module docstring. Pooled cells (a long prompt) sit at their cell
    index, and hover says which tokens a cell is the maximum over ("max over queries
    a..b, keys c..d"). ``selected_token >= 0`` outlines the row and column holding it.
    The colour scale runs from 0 to `head_scale` (the first token's column set apart).
    """
    z = np.ascontiguousarray(panel.head(head), dtype=np.float32)
    first_key = panel.key_start == 0
    top = head_scale(z, first_key)
    # Along a 150 px bar: about 22 characters (the hover has each cell's weight).
    if top >= 1.0:
        scale_note = "weight"
    else:
        scale_note = f"to {top:.2f} (key 0 more)" if first_key else f"weight to {top:.2f}"
    ys, xs = attention_axes(panel)
    if panel.exact:
        texts = panel.tokens.texts
        y_labels = [escape_token(texts[int(q)]) for q in ys]
        x_labels = [escape_token(texts[int(k)]) for k in xs]
        title = f"layers[{panel.layer}] head {head}"
        if not panel.whole:
            title += f" · queries {ys[0]}..{ys[-1]}, keys {xs[0]}..{xs[-1]} (exact)"
    else:
        y_labels = [block_label(panel, *span) for span in panel.query_ranges()]
        x_labels = [block_label(panel, *span) for span in panel.key_ranges()]
        # Short, and drawn at the tool figures' title size (below), to stay clear of plotly's
        # tool bar at the figure's narrowest; the hover says what a cell is the maximum over.
        title = f"layers[{panel.layer}] head {head} · max of {panel.block}×{panel.block} blocks"
    heatmap = dict(
        z=z,
        x=xs,
        y=ys,
        zmin=0.0,
        zmax=top,
        colorscale=COLORSCALE,
        # The scale's title beside the bar, not above it: the plot keeps its width.
        colorbar=dict(title=dict(text=scale_note, side="right"), thickness=12),
        name=f"head {head}",
    )
    layout = dict(
        title=dict(text=title, font=dict(size=13)),
        uirevision=f"attention:{len(panel.tokens)}:{panel.block}:{panel.query_start}:{panel.key_start}",
        shapes=attention_selection(panel, selected_token),
        width=ATTENTION_WIDTH,
        height=ATTENTION_HEIGHT,
        margin=dict(l=80, r=10, t=30, b=70),
        hovermode="closest",
    )
    traces: list = []
    if panel.exact and max(panel.rows, panel.cols) <= HOVER_TEXT_MAX_TOKENS:
        customdata = np.empty(z.shape + (2,), dtype=object)
        customdata[:, :, 0] = np.array(y_labels, dtype=object)[:, None]
        customdata[:, :, 1] = np.array(x_labels, dtype=object)[None, :]
        heatmap.update(
            customdata=customdata,
            hovertemplate=(
                "query %{y:d}: %{customdata[0]}<br>key %{x:d}: %{customdata[1]}<br>weight %{z:.4f}<extra></extra>"
            ),
        )
        layout.update(
            xaxis=token_axis(
                x_labels,
                int(xs[0]),
                ATTENTION_TICK_LABELS,
                title=dict(text="key"),
                tickfont=dict(size=ATTENTION_TICK_FONT),
            ),
            yaxis=token_axis(
                y_labels,
                int(ys[0]),
                ATTENTION_TICK_LABELS,
                title=dict(text="query"),
                autorange="reversed",
                tickfont=dict(size=ATTENTION_TICK_FONT),
            ),
        )
        traces.append(go.Heatmap(**heatmap))
    else:
        # Hidden axes: a tick (and so a hover label) at every cell; no drawn labels.
        def full(values, labels):
            return dict(
                tickmode="array",
                tickvals=values,
                ticktext=labels,
                showticklabels=False,
                ticks="",
                showgrid=False,
                zeroline=False,
            )

        if panel.exact:
            template = "query %{y:d}: %{y}<br>key %{x:d}: %{x}<br>weight %{z:.4f}<extra></extra>"
            drawn_y, drawn_x, names = y_labels, x_labels, ("key", "query")
        else:
            template = "max over queries %{y}<br>keys %{x}<br>weight %{z:.4f}<br>click to zoom<extra></extra>"
            # Drawn ticks: each labelled cell's first token position.
            drawn_y = [str(first) for first, _ in panel.query_ranges()]
            drawn_x = [str(first) for first, _ in panel.key_ranges()]
            names = (f"key (blocks of {panel.block})", f"query (blocks of {panel.block})")
        heatmap.update(hovertemplate=template)
        layout.update(
            xaxis=full(xs, x_labels),
            yaxis=dict(full(ys, y_labels), autorange="reversed"),
            xaxis2=_drawn_axis(drawn_x, int(xs[0]), "x", names[0]),
            yaxis2=_drawn_axis(drawn_y, int(ys[0]), "y", names[1]),
        )
        traces.append(go.Heatmap(**heatmap))
        # plotly draws an axis only when a trace uses it: an empty, hover-less trace.
        traces.append(
            go.Scatter(x=[], y=[], xaxis="x2", yaxis="y2", hoverinfo="skip", showlegend=False, name="tick labels")
        )
    return go.Figure(data=traces, layout=layout)


#: How the head grid marks the head the heatmap shows, and the ablated heads, in their titles.
SHOWN_MARK = "▶ "


ABLATED_MARK = " ✕ ablated"


#: The ablated mark in a narrow column (the grid's title says what ✕ means there).
ABLATED_SHORT = " ✕"


def head_title(head: int, shown: bool, ablated: bool, compact: bool = False) -> str:
    """A head's title in the grid: marked when it is the one shown, and when it is ablated
    (``compact``: its number alone, for a grid of narrow columns)."""
    name = str(head) if compact else f"head {head}"
    mark = (ABLATED_SHORT if compact else ABLATED_MARK) if ablated else ""
    return f"{SHOWN_MARK if shown else ''}{name}{mark}"


def grid_shape(heads: int) -> tuple[int, int]:
    """``(rows, columns)`` of the head grid for ``heads`` heads."""
    cols = max(1, min(heads, max(GRID_COLS, math.ceil(heads / GRID_ROWS))))
    return math.ceil(heads / cols), cols


def head_grid_figure(
    panel: AttentionPattern, max_side: int | None = None, shown: int | None = None, ablated: Sequence[int] = ()
) -> go.Figure:
    """Small multiples: one heatmap per head of ``panel``'s layer (`grid_shape`).

    Each is the head's thumbnail (its exact probabilities mean-pooled in the engine),
    :func:`mean_pool` ed further to at most ``max_side`` a side if given; each on its own
    scale, as the heatmap (`head_scale`: the first token's column set apart); hover shows
    only the head and the (pooled) weight. Trace ``h`` is
    head ``h``. The ``shown`` head (the big heatmap's) is outlined and its title marked;
    the ``ablated`` heads' titles say so.
    """
    heads = panel.num_heads
    rows, cols = grid_shape(heads)
    compact = cols > GRID_NAMED_COLS
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=[head_title(h, h == shown, h in ablated, compact) for h in range(heads)],
        horizontal_spacing=0.03,
        vertical_spacing=min(0.08, 0.5 / rows),
    )
    for h in range(heads):
        thumbnail = panel.thumbnails[h] if max_side is None else mean_pool(panel.thumbnails[h], max_side)
        fig.add_trace(
            go.Heatmap(
                z=thumbnail,
                zmin=0.0,
                zmax=head_scale(np.asarray(thumbnail), panel.key_start == 0),  # as the heatmap's
                colorscale=COLORSCALE,
                showscale=False,
                name=f"head {h}",
                hovertemplate=f"head {h}{' (ablated)' if h in ablated else ''}<br>weight %{{z:.3f}}<extra></extra>",
            ),
            row=h // cols + 1,
            col=h % cols + 1,
        )
    if compact:
        fig.update_annotations(font=dict(size=11))
    fig.update_xaxes(showticklabels=False, ticks="", showgrid=False, zeroline=False)
    fig.update_yaxes(showticklabels=False, ticks="", showgrid=False, zeroline=False, autorange="reversed")
    fig.update_layout(
        title=dict(text=f"layers[{panel.layer}]: all heads (click one)"),
        width=GRID_WIDTH,
        height=(GRID_WIDTH - GRID_FRAME_PX) // cols * rows + GRID_TITLES_PX,
        margin=dict(l=10, r=10, t=38, b=10),
        uirevision=f"grid:{len(panel.tokens)}",
    )
    if shown is not None and 0 <= shown < heads:
        axis = "" if shown == 0 else str(shown + 1)
        fig.add_shape(
            type="rect",
            xref=f"x{axis} domain",
            yref=f"y{axis} domain",
            x0=-0.02,
            x1=1.02,
            y0=-0.02,
            y1=1.02,
            line=dict(color=HIGHLIGHT, width=2),
            name="shown head",
        )
    return fig
