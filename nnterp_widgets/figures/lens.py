"""The logit lens's picture: layers x positions, each cell the top-1 token coloured by
its probability, the top-k on hover.

    figure = lens_figure(grid, selected_token=-1)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from ..requests.lens import LensGrid
from .common import (
    CELL_TEXT_CHARS,
    COLORSCALE,
    FIGURE_WIDTH,
    MAX_TICK_LABELS,
    PROBABILITY_FORMAT,
    escape_token,
    position_label,
    selection_shapes,
    token_axis,
)


#: A lens row's height: 30 layers in 270 px put the lens under the attention view on the
#: first screen of JupyterLab's 1600 x 857 page.
LENS_ROW_PX = 9


#: Under a lens's columns: room for their rotated labels, and for the axis's title.
LENS_LABELS_PX = 54


LENS_AXIS_TITLE_PX = 18


#: The lens's layer labels' and cells' font sizes: small enough that a label (about 1.2x
#: its size tall) fits a row without overlapping the next.
LENS_TICK_FONT = 7


LENS_CELL_FONT = 8


#: Above a lens: its title, at the tool figures' title size.
LENS_TITLE_PX = 24


LENS_TITLE_FONT = 13


#: A lens column is this wide while its cell labels are drawn (``CELL_TEXT_CHARS`` at 10 px a character, at most).
LENS_COLUMN_PX = 46


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


def lens_hover(panel: LensGrid, layer: int, position: int) -> list[tuple[str, float]]:
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


def lens_figure(panel: LensGrid, selected_token: int = -1) -> go.Figure:
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
        title=dict(text=title, font=dict(size=LENS_TITLE_FONT), y=1, yanchor="top", yref="container", pad=dict(t=4)),
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
        height=max(220, LENS_ROW_PX * layers + LENS_TITLE_PX + below),
        margin=dict(l=80, r=10, t=LENS_TITLE_PX, b=below),
        hovermode="closest",
    )


#: The lens table's style: theme variables, one line a row, a cell's shade its top-1
#: probability in the brand colour (the text stays the theme's, readable at any shade).
_TABLE_STYLE = (
    "<style>.nnw-lens-table{border-collapse:collapse;font-family:var(--jp-code-font-family,monospace);"
    "font-size:var(--jp-code-font-size,12px);color:var(--jp-ui-font-color1,CanvasText)}"
    ".nnw-lens-table td,.nnw-lens-table th{padding:0 4px;border:1px solid var(--jp-border-color2,#ddd);"
    "white-space:pre;text-align:left}"
    ".nnw-lens-table th{font-weight:600;font-family:var(--jp-ui-font-family,sans-serif)}"
    ".nnw-lens-table .nnw-lens-selected{outline:2px solid var(--jp-brand-color1,Highlight);outline-offset:-2px}"
    ".nnw-lens-scroll{max-height:420px;overflow:auto}</style>"
)
#: The shade of a cell of probability 1 ("r, g, b" at an alpha of the probability x 0.6).
LENS_TABLE_SHADE = "66, 133, 244"


def lens_table_html(panel: LensGrid, selected_token: int = -1) -> str:
    """The lens as a logit-lens table: a row a layer, a column a position of the window,
    each cell its top-1 token's whole text (the one token rule, escaped) shaded by its
    probability; a cell's title holds its top-k. ``selected_token`` outlines its column.
    Text to read at any width, beside the heatmap's colours."""
    import html

    from .tokens import show_token

    def cell(text: str, attributes: str = "", tag: str = "td") -> str:
        return f"<{tag}{attributes}>{html.escape(show_token(text))}</{tag}>"

    positions = list(panel.positions)
    marked = {p: ' class="nnw-lens-selected"' if p == selected_token else "" for p in positions}
    head = "".join(
        f'<th{marked[p]} title="position {p}">{html.escape(show_token(panel.tokens.texts[p]))}</th>' for p in positions
    )
    rows = []
    for layer, label in enumerate(panel.layer_labels):
        cells = []
        for column, position in enumerate(positions):
            probs = panel.top_probs[layer, column]
            texts = panel.top_texts[layer][column]
            title = html.escape(" · ".join(f"{show_token(t)} {p:.3f}" for t, p in zip(texts, probs, strict=True)))
            shade = f"background:rgba({LENS_TABLE_SHADE},{0.6 * float(probs[0]):.3f})"
            attributes = f'{marked[position]} style="{shade}" title="{title}"'
            cells.append(cell(texts[0], attributes))
        rows.append(f"<tr><th>{html.escape(label)}</th>{''.join(cells)}</tr>")
    caption = f"logit lens, top-1 at positions {panel.start}..{panel.stop - 1}"
    return (
        f'{_TABLE_STYLE}<div class="nnw-lens-scroll"><table class="nnw-lens-table" aria-label="{caption}">'
        f"<tr><th>layer</th>{head}</tr>{''.join(rows)}</table></div>"
    )
