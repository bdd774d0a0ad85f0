"""The pictures: pure functions from the panels' data to plotly figures.

Nothing here knows about the engine or a widget's state; each function takes one of the
data objects of :mod:`nnterp_widgets.session.panels` (and plain ints) and returns a
``plotly.graph_objects.Figure``. The widgets (``attention.py``, ``lens.py``) copy these
figures into ``FigureWidget`` s.

Token text is data. Plotly renders a subset of HTML (``<b>``, ``<br>``, ``<a>``, entities)
in tick labels, cell text and hover labels, and typesets ``$...$`` as TeX where MathJax is
loaded, so every token string that reaches a figure goes through :func:`escape_token`
first, and token text is only ever put in data arrays (``ticktext``, ``text``,
``customdata``), never into a ``hovertemplate`` / ``texttemplate`` string.

Repeated tokens stay apart: the axes are numeric (position ``i`` is at ``i``) and token
text is only the tick *label* (``tickvals`` = positions, ``ticktext`` = text), so two
identical tokens are two different rows and columns.

Sizes: the heatmaps' ``z`` are float32 numpy arrays, which plotly 7 serialises as base64
typed arrays (4 bytes a cell, plus a third for base64). Hover text for the attention
heatmap is per cell ``customdata`` up to :data:`HOVER_TEXT_MAX_TOKENS` tokens; past that
``n²`` strings would be tens of MB, so the heatmap's own (hidden) axes carry every
position's text as ``ticktext`` and the hover's ``%{x}`` / ``%{y}`` show it (plotly
labels a hover value with the tick text of an ``array`` tick at that value), while a
second pair of overlaid axes draws the sparse visible tick labels.

In a widget the figures travel in column form: :mod:`.figure_transport`.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..session.panels import AttentionPanel, LensPanel, mean_pool
from .tokens import show_token

__all__ = [
    "CELL_TEXT_CHARS",
    "COLORSCALE",
    "HIGHLIGHT",
    "FIGURE_WIDTH",
    "HOVER_TEXT_MAX_TOKENS",
    "MAX_TICK_LABELS",
    "PLOTLY_CONFIG",
    "attention_axes",
    "attention_figure",
    "attention_selection",
    "block_label",
    "escape_token",
    "head_grid_figure",
    "lens_figure",
    "lens_hover",
    "lens_layout",
    "lens_width",
    "mean_pool",
    "selection_shapes",
    "tick_positions",
]

#: Sequential, perceptually uniform, readable for colour-blind viewers; dark purple (0)
#: to yellow (1) reads the same on a light or a dark page (the figure paints its own
#: background).
COLORSCALE = "Viridis"
#: Outline of the selected token's row / column: stands out on every Viridis colour.
HIGHLIGHT = "#ff2d78"
#: At most this many tick labels on a token axis; past it every n-th position is labelled
#: (the hover still names every position).
MAX_TICK_LABELS = 64
#: A lens cell's label shows at most this many characters (the hover has the whole text).
CELL_TEXT_CHARS = 8
#: Up to this many tokens the attention hover text is per-cell ``customdata``.
HOVER_TEXT_MAX_TOKENS = 256

#: plotly.js's settings for every figure, in a widget and in the export: no logo, and only
#: the tools these figures use (zoom, pan, reset, save as PNG), so the tool bar that shows on
#: hover is short and stays clear of the left-aligned titles.
PLOTLY_CONFIG = {
    "displaylogo": False,
    "modeBarButtonsToRemove": [
        "select2d",
        "lasso2d",
        "zoomIn2d",
        "zoomOut2d",
        "autoScale2d",
        "toggleSpikelines",
        "hoverClosestCartesian",
        "hoverCompareCartesian",
    ],
}

#: Width of every figure but a wide lens. Figures set their width: plotly's autosize does not
#: work for a FigureWidget (its first draw, before it is attached, writes plotly's default
#: 700 px into the layout, and later updates keep it), so a width left to autosize is 700 px
#: whatever the panel's, and a panel narrower than that cut the colour bar and the
#: right-hand columns off.
FIGURE_WIDTH = 700
#: Sizes that put the tree, the heatmap with its head grid, and the lens on one screen
#: (1600 x 1000, JupyterLab): the heatmap's size, the head grid's width, a lens row's height.
ATTENTION_WIDTH = 430
ATTENTION_HEIGHT = 300
GRID_WIDTH = 300
LENS_ROW_PX = 11
#: The head grid: at least `GRID_COLS` columns, at most `GRID_ROWS` rows (more heads take
#: more, narrower columns: a 32-head layer is 3 rows of 11), so the grid and the token view
#: under it stay as tall as the heatmap beside them; square cells, `GRID_FRAME_PX` across
#: the margins; past `GRID_COLS` columns a head's title is its number alone.
GRID_COLS = 4
GRID_ROWS = 3
GRID_FRAME_PX = 20
#: The head grid's height besides its rows: its title, the margins, the last row's title.
GRID_TITLES_PX = 58
#: Under a lens's columns: room for their rotated labels, and for the axis's title.
LENS_LABELS_PX = 60
LENS_AXIS_TITLE_PX = 18
#: The lens's layer labels' and cells' font sizes: small enough that a label (about 1.2x
#: its size tall) fits a row without overlapping the next.
LENS_TICK_FONT = 8
LENS_CELL_FONT = 9
#: The most token labels the heatmap draws a side, and their font: its plot area is about
#: 200 px, and a label at 10 px needs about 14 (more overlap; every token is in the hover).
ATTENTION_TICK_LABELS = 14
ATTENTION_TICK_FONT = 10
#: How hover writes a probability: three significant digits, so a small one shows its
#: magnitude (0.000123, not 0.000); d3's format, trailing zeros trimmed.
PROBABILITY_FORMAT = ".3~g"
#: A lens column is this wide while its cell labels are drawn (``CELL_TEXT_CHARS`` at 10 px a character, at most).
LENS_COLUMN_PX = 46


def escape_token(text: str, max_chars: int | None = None) -> str:
    """A token's text as a plotly label: :func:`.tokens.show_token`, then escaped for plotly.

    ``<``, ``>`` and ``&`` become entities so plotly shows markup-like text literally, and
    ``$`` becomes ``&#36;`` so MathJax never typesets a label. Quotes stay: plotly decodes
    ``&lt;``, ``&gt;``, ``&amp;`` and numeric entities but shows ``&quot;`` as it is. ``max_chars``
    cuts the shown text before escaping, so no entity is cut. The result is for plotly
    only: plotly decodes the entities when it draws.
    """
    return html.escape(show_token(text, max_chars), quote=False).replace("$", "&#36;")


def tick_positions(count: int, max_labels: int = MAX_TICK_LABELS) -> list[int]:
    """Positions that get a tick label: all of them, or every n-th so at most ``max_labels``."""
    step = max(1, math.ceil(count / max_labels)) if count else 1
    return list(range(0, count, step))


def token_axis(labels: Sequence[str], start: int = 0, max_labels: int = MAX_TICK_LABELS, **extra) -> dict:
    """A token axis whose ``labels`` are positions ``start``, ``start + 1`` ..., at most
    ``max_labels`` of them drawn (every n-th)."""
    vals = tick_positions(len(labels), max_labels)
    return dict(
        tickmode="array",
        tickvals=[start + i for i in vals],
        ticktext=[labels[i] for i in vals],
        showgrid=False,
        zeroline=False,
        **extra,
    )


def position_label(position: int, label: str) -> str:
    """A token's tick label with its position (``"12 ␣Paris"``): a lens window starts
    anywhere in the prompt, and the index says where. ``label`` is already escaped."""
    return f"{position} {label}"


def selection_shapes(count: int, selected: int, *, row: bool, column: bool, rows: int | None = None) -> list[dict]:
    """Outline rectangles around row and/or column ``selected`` of a ``rows × count`` grid.

    ``rows`` defaults to ``count`` (a square attention map). ``selected < 0``: no shapes.
    """
    if selected < 0:
        return []
    if selected >= count:
        raise IndexError(f"selected token {selected} is out of range: the prompt has positions 0..{count - 1}")
    rows = count if rows is None else rows
    shapes = []
    if row:
        shapes.append(_outline("selected row", -0.5, count - 0.5, selected - 0.5, selected + 0.5))
    if column:
        shapes.append(_outline("selected column", selected - 0.5, selected + 0.5, -0.5, rows - 0.5))
    return shapes


def _outline(name: str, x0: float, x1: float, y0: float, y1: float) -> dict:
    """A highlight rectangle over data coordinates, drawn above the heatmap, unfilled."""
    return dict(
        type="rect",
        name=name,
        xref="x",
        yref="y",
        layer="above",
        line=dict(color=HIGHLIGHT, width=2),
        fillcolor="rgba(0,0,0,0)",
        x0=x0,
        x1=x1,
        y0=y0,
        y1=y1,
    )


def attention_axes(panel: AttentionPanel) -> tuple[np.ndarray, np.ndarray]:
    """The attention heatmap's ``(y, x)`` coordinates: token positions where the cells are
    exact (a zoom window's start at its own), cell indices where they are pooled."""
    if panel.exact:
        return (
            np.arange(panel.query_start, panel.query_start + panel.rows, dtype=np.int32),
            np.arange(panel.key_start, panel.key_start + panel.cols, dtype=np.int32),
        )
    return np.arange(panel.rows, dtype=np.int32), np.arange(panel.cols, dtype=np.int32)


def block_label(panel: AttentionPanel, first: int, stop: int) -> str:
    """A pooled cell's side as hover text: ``"12..15 (␣the … ␣Paris)"`` (escaped)."""
    texts = panel.tokens.texts
    last = stop - 1
    if last == first:
        return f"{first} ({escape_token(texts[first])})"
    return f"{first}..{last} ({escape_token(texts[first])} … {escape_token(texts[last])})"


def attention_selection(panel: AttentionPanel, selected: int) -> list[dict]:
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


def attention_figure(panel: AttentionPanel, head: int, selected_token: int = -1) -> go.Figure:
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
    scale_note = "weight" if top >= 1.0 else f"weight (to {top:.2f}{'; first token saturates' if first_key else ''})"
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
        title = f"layers[{panel.layer}] head {head} · max over {panel.block}×{panel.block}-token blocks (click to zoom)"
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
        title=dict(text=title),
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
            template = "max over queries %{y}<br>keys %{x}<br>weight %{z:.4f}<extra></extra>"
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


def head_title(head: int, shown: bool, ablated: bool, compact: bool = False) -> str:
    """A head's title in the grid: marked when it is the one shown, and when it is ablated
    (``compact``: its number alone, for a grid of narrow columns)."""
    name = str(head) if compact else f"head {head}"
    return f"{SHOWN_MARK if shown else ''}{name}{ABLATED_MARK if ablated else ''}"


def grid_shape(heads: int) -> tuple[int, int]:
    """``(rows, columns)`` of the head grid for ``heads`` heads."""
    cols = max(1, min(heads, max(GRID_COLS, math.ceil(heads / GRID_ROWS))))
    return math.ceil(heads / cols), cols


def head_grid_figure(
    panel: AttentionPanel, max_side: int | None = None, shown: int | None = None, ablated: Sequence[int] = ()
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
    compact = cols > GRID_COLS
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
                hovertemplate=f"head {h}<br>weight %{{z:.3f}}<extra></extra>",
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


def _float32_value(value) -> float:
    """A float32 as the shortest Python float that reads back as the same float32.

    (``float(np.float32(1/3))`` is ``0.3333333432674408``: 18 bytes of JSON for 8 digits.)
    """
    return float(str(np.float32(value)))


def _float32_values(array: np.ndarray) -> np.ndarray:
    """:func:`_float32_value` over an array: an object array of Python floats."""
    shortest = np.asarray(array, dtype=np.float32).astype(str)
    return np.frompyfunc(float, 1, 1)(shortest)


def _cached_escape():
    cache: dict[str, str] = {}

    def escape(text: str) -> str:
        if text not in cache:
            cache[text] = escape_token(text)
        return cache[text]

    return escape


def lens_hover(panel: LensPanel, layer: int, position: int) -> list[tuple[str, float]]:
    """The top-k at (``layer``, ``position``): ``[(token text, probability)]``, best first.

    The text is the panel's raw text (the figure escapes it with :func:`escape_token`).
    """
    if not 0 <= layer < panel.num_layers:
        raise IndexError(f"layer {layer} is out of range: the lens has layers 0..{panel.num_layers - 1}")
    if position not in panel.positions:
        raise IndexError(
            f"position {position} is out of range: the lens shows positions {panel.start}..{panel.stop - 1}"
        )
    texts = panel.top_texts[layer][position - panel.start]
    probs = panel.top_probs[layer, position - panel.start]
    return [(texts[i], _float32_value(probs[i])) for i in range(len(texts))]


#: The widest the lens is drawn: the explorer's column beside the tree (about 770 px of
#: a 1600 px page), so it never scrolls sideways nor hides its colour bar; past that its
#: cells narrow (`cell_chars`). (A width left to plotly's autosize is not applied by a
#: FigureWidget already drawn at a fixed one: the figure stayed as it was.)
LENS_FIXED_MAX = 760


def lens_width(count: int) -> int:
    """The lens figure's width for ``count`` positions: room for every cell label, at
    most `LENS_FIXED_MAX`."""
    if count > MAX_TICK_LABELS:
        return FIGURE_WIDTH
    return min(LENS_FIXED_MAX, max(FIGURE_WIDTH, 80 + 10 + 90 + LENS_COLUMN_PX * count))  # margins, bar, columns


def cell_chars(count: int) -> int:
    """How much of a lens cell's token is drawn: `CELL_TEXT_CHARS` while the columns are
    wide enough, fewer (at least 3) as they narrow; hover has the whole text."""
    fits = (LENS_FIXED_MAX - 180) // max(1, count) // 7  # px per column / px per character
    return max(3, min(CELL_TEXT_CHARS, fits))


def lens_figure(panel: LensPanel, selected_token: int = -1) -> go.Figure:
    """Logit lens: layers (rows, ``layers[0]`` on top, last layer at the bottom) × the
    panel's window of positions (``x`` is the position in the prompt).

    Each cell is coloured by its top-1 probability (0..1) and labelled with the top-1
    token (escaped and cut to `cell_chars`, ``text`` + ``texttemplate``; the
    labels are drawn for up to :data:`MAX_TICK_LABELS` positions). Hover: ``customdata[l][p] = [layer
    label, position's token, top-k texts..., top-k probabilities...]``. ``selected_token
    >= 0`` outlines that position's column.
    """
    layers, count, k = panel.top_probs.shape
    start = panel.start
    z = np.ascontiguousarray(panel.top1_probs(), dtype=np.float32)
    labels = [escape_token(text) for text in panel.tokens.texts[start : start + count]]
    layer_labels = [escape_token(label) for label in panel.layer_labels]
    # The cells' labels, cut to `cell_chars(count)`; drawn up to MAX_TICK_LABELS positions (past
    # that a cell is a few pixels wide and the hover is the way to read it).
    chars = cell_chars(count)
    text = [[escape_token(cell, chars) for cell in row] for row in panel.top1_texts()]
    escape = np.frompyfunc(_cached_escape(), 1, 1)
    customdata = np.empty((layers, count, 2 + 2 * k), dtype=object)
    customdata[:, :, 0] = np.array(layer_labels, dtype=object)[:, None]
    customdata[:, :, 1] = np.array(labels, dtype=object)[None, :]
    top_texts = np.empty((layers, count, k), dtype=object)
    top_texts[...] = [[list(cell) for cell in row] for row in panel.top_texts]
    customdata[:, :, 2 : 2 + k] = escape(top_texts)
    customdata[:, :, 2 + k :] = _float32_values(panel.top_probs)
    lines = "".join(
        f"<br>%{{customdata[{2 + i}]}}  %{{customdata[{2 + k + i}]:{PROBABILITY_FORMAT}}}" for i in range(k)
    )
    heatmap = go.Heatmap(
        z=z,
        x=np.arange(start, start + count, dtype=np.int32),
        y=np.arange(layers, dtype=np.int32),
        zmin=0.0,
        zmax=1.0,
        colorscale=COLORSCALE,
        colorbar=dict(title=dict(text="top-1 p"), thickness=12),
        text=text,
        texttemplate="%{text}" if count <= MAX_TICK_LABELS else "",
        textfont=dict(size=LENS_CELL_FONT),
        customdata=customdata,
        hovertemplate="%{customdata[0]}, position %{x:d}: %{customdata[1]}" + lines + "<extra></extra>",
        name="logit lens",
    )
    layout = lens_layout(
        [position_label(start + i, label) for i, label in enumerate(labels)],
        layer_labels,
        selected_token if selected_token in panel.positions else -1,
        title="logit lens: top-1 token per layer and position",
        axis_title=None,  # each column's label starts with its position
        revision="lens",
        start=start,
    )
    return go.Figure(data=[heatmap], layout=layout)


def lens_layout(
    labels: Sequence[str],
    layer_labels: Sequence[str],
    selected: int = -1,
    *,
    title: str,
    axis_title: str | None = "position",
    revision: str = "lens",
    start: int = 0,
) -> dict:
    """The layout of a lens-shaped heatmap: layers (rows, ``layers[0]`` on top) x columns.

    ``labels`` / ``layer_labels`` are already escaped; ``selected >= 0`` outlines that
    column; ``revision`` prefixes ``uirevision`` (kept while the grid's size is); the
    columns are positions ``start`` onwards (a lens window); ``axis_title=None``: no
    title under the columns (their labels say what they are), and its room saved.
    """
    count, layers = len(labels), len(layer_labels)
    below = LENS_LABELS_PX + (LENS_AXIS_TITLE_PX if axis_title else 0)
    return dict(
        title=dict(text=title),
        xaxis=token_axis(labels, start, **(dict(title=dict(text=axis_title)) if axis_title else {})),
        yaxis=dict(
            tickmode="array",
            tickvals=list(range(layers)),
            ticktext=list(layer_labels),
            tickfont=dict(size=LENS_TICK_FONT),
            autorange="reversed",
            showgrid=False,
            zeroline=False,
        ),
        shapes=selection_shapes(start + count, selected, row=False, column=True, rows=layers),
        uirevision=f"{revision}:{start}:{count}:{layers}",
        width=lens_width(count),
        height=max(260, LENS_ROW_PX * layers + 32 + below),
        margin=dict(l=80, r=10, t=32, b=below),
        hovermode="closest",
    )
