"""How a figure travels to a ``FigureWidget``: heatmaps in column form, as binary buffers.

``FigureWidget`` messages go through ``plotly.serializers._py_to_js``,
which sends a numpy array as a binary buffer only when it is 1-D (and not int64 / uint64);
a 2-D ``z`` would become nested JSON lists (about 13 MB for 1024 tokens). So the views
show :func:`for_widget` ``(fig)``: every heatmap in plotly.js's *column* form, one entry
per cell in ``x``, ``y``, ``z`` (row-major; ``z`` float32, ``x`` / ``y`` the smallest
unsigned int type that holds the positions), which plotly.js grids back
(``convert_column_xyz``) into the same picture. Per-cell ``customdata`` / ``text`` /
``hovertext`` become one entry per cell in the same order; plotly.js grids ``text`` /
``hovertext`` alongside ``z`` and looks ``customdata`` up through the cell's original
index, so hover and cell labels are unchanged. :func:`heatmap_matrix` reads the grid back
on the Python side. The figure functions themselves keep the 2-D layout (``to_json``
already writes a 2-D float32 array as one base64 block; the static export uses that).

    widget_figure = for_widget(attention_figure(panel, head))   # what a view shows
    heatmap_matrix(widget_figure.data[0])                       # its cells, read back 2-D
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

__all__ = ["for_widget", "heatmap_matrix"]


_CELL_PROPS = ("customdata", "text", "hovertext")


def _index_dtype(top: int) -> type:
    for dtype in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dtype).max:
            return dtype
    raise ValueError(f"position {top} does not fit in uint32")


def _column_axis(values, count: int) -> np.ndarray | None:
    """One side's cell coordinates as a compact numeric array; None if they cannot be columns.

    ``values`` is the trace's ``x`` (or ``y``), None meaning ``0..count-1``. Column form
    needs one coordinate per cell, strictly increasing (plotly.js grids by distinct
    value); non-negative integers become the smallest unsigned int type that holds them.
    """
    if values is None:
        return np.arange(count, dtype=_index_dtype(max(count - 1, 0)))
    values = np.asarray(values)
    if values.shape != (count,) or values.dtype.kind not in "iuf" or not np.all(np.isfinite(values)):
        return None
    if count > 1 and not np.all(np.diff(values) > 0):
        return None
    if (
        count
        and 0 <= values.min()
        and values.max() <= np.iinfo(np.uint32).max
        and np.array_equal(values, np.round(values))
    ):
        return values.astype(_index_dtype(int(values.max())))
    return values.astype(np.float64)


def _cells(value, rows: int, cols: int):
    """A per-cell property (``rows × cols [× ...]``) flattened to one entry per cell, row-major.

    Returns ``value`` itself for None or a scalar, and ``False`` for anything else (then the
    trace is left as it is).
    """
    if value is None or isinstance(value, str) or np.isscalar(value):
        return value
    try:
        cells = np.asarray(value, dtype=object)
    except ValueError:  # ragged
        return False
    if cells.shape[:2] != (rows, cols):
        return False
    return cells.reshape((rows * cols,) + cells.shape[2:])


def _column_heatmap(trace: go.Heatmap) -> go.Heatmap | None:
    """``trace`` in column form (the module docstring), or None where it has to stay as it is."""
    if trace.z is None or trace.transpose:
        return None
    if any(trace[name] is not None for name in ("x0", "dx", "y0", "dy")):
        return None
    z = np.asarray(trace.z)
    if z.ndim != 2 or z.dtype.kind not in "iuf" or z.size == 0:
        return None
    rows, cols = z.shape
    x = _column_axis(trace.x, cols)
    y = _column_axis(trace.y, rows)
    if x is None or y is None:
        return None
    props = trace.to_plotly_json()
    props.pop("type", None)
    for name in _CELL_PROPS:
        cells = _cells(props.get(name), rows, cols)
        if cells is False:
            return None
        if cells is not None:
            props[name] = cells
    props.update(
        z=np.ascontiguousarray(z, dtype=np.float32).reshape(-1),
        x=np.tile(x, rows),
        y=np.repeat(y, cols),
    )
    return go.Heatmap(**props)


def for_widget(fig: go.Figure) -> go.Figure:
    """``fig`` as a ``FigureWidget`` should carry it: every heatmap in column form.

    The picture, hover and cell labels are the same; the numbers (``z``, ``x``, ``y``) are
    1-D numpy arrays, which the widget sends as binary buffers. Other traces, and a
    heatmap that cannot be put in columns (non-numeric or unsorted axes, ``x0`` / ``dx``,
    ``transpose``), are kept as they are.
    """
    data = []
    for trace in fig.data:
        columns = _column_heatmap(trace) if trace.type == "heatmap" else None
        data.append(columns if columns is not None else trace)
    return go.Figure(data=data, layout=fig.layout)


def heatmap_matrix(trace, prop: str = "z") -> np.ndarray:
    """A heatmap's ``z`` (or another per-cell property) as the ``rows × cols`` grid it draws.

    A 2-D ``z`` is returned as it is; a trace in column form (:func:`for_widget`) is gridded
    back the way plotly.js does: rows by distinct ``y``, columns by distinct ``x``, both
    ascending. Cells that no entry fills are NaN (``z``) or None (other properties).
    """
    values = trace[prop]
    z = np.asarray(trace.z)
    if z.ndim == 2:
        return np.asarray(values) if prop == "z" else np.asarray(values, dtype=object)
    x, y = np.asarray(trace.x), np.asarray(trace.y)
    if not (len(x) == len(y) == len(z)):
        raise ValueError(f"a column heatmap needs x, y, z of one length; got {len(x)}, {len(y)}, {len(z)}")
    xs, ys = np.unique(x), np.unique(y)
    cols, rows = np.searchsorted(xs, x), np.searchsorted(ys, y)
    if prop == "z":
        kind = z.dtype if z.dtype.kind == "f" else np.float64
        grid = np.full((len(ys), len(xs)), np.nan, dtype=kind)
        grid[rows, cols] = z
        return grid
    cells = np.asarray(values, dtype=object)
    grid = np.full((len(ys), len(xs)) + cells.shape[1:], None, dtype=object)
    grid[rows, cols] = cells
    return grid
