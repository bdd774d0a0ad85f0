"""What every figure shares: the colours, plotly's one config, token text made safe
for plotly (`escape_token`), token axes and selection outlines.

Token text is data. Plotly renders a subset of HTML (``<b>``, ``<br>``, ``<a>``, entities)
in tick labels, cell text and hover labels, and typesets ``$...$`` as TeX where MathJax is
loaded, so every token string that reaches a figure goes through :func:`escape_token`
first, and token text is only ever put in data arrays (``ticktext``, ``text``,
``customdata``), never into a ``hovertemplate`` / ``texttemplate`` string.

Repeated tokens stay apart: the axes are numeric (position ``i`` is at ``i``) and token
text is only the tick *label* (``tickvals`` = positions, ``ticktext`` = text), so two
identical tokens are two different rows and columns.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from .tokens import show_token


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


#: How hover writes a probability: three significant digits, so a small one shows its
#: magnitude (0.000123, not 0.000); d3's format, trailing zeros trimmed.
PROBABILITY_FORMAT = ".3~g"


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


#: Diverging, white at 0: an effect's sign is its colour (blue below 0, red above).
EFFECT_COLORSCALE = "RdBu_r"


def effect_heatmap(z: np.ndarray, half: float, colorbar: str, **trace: Any) -> go.Heatmap:
    """The heatmap of a signed effect (patching, a pair's lens difference, occlusion):
    cells at integer ``x`` / ``y``, white at 0, the colours from ``-half`` to ``half``;
    ``trace`` adds the trace's own (``customdata``, ``hovertemplate``, gaps)."""
    rows, columns = np.asarray(z).shape
    return go.Heatmap(
        z=z,
        x=np.arange(columns, dtype=np.int32),
        y=np.arange(rows, dtype=np.int32),
        zmid=0.0,
        zmin=-half,
        zmax=half,
        colorscale=EFFECT_COLORSCALE,
        colorbar=dict(title=dict(text=colorbar), thickness=12),
        **trace,
    )
