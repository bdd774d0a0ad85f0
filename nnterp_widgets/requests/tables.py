"""Results as tables: every result's ``to_pandas()`` builds its frame here.

    frame = session.lens("The Eiffel Tower is in").result().to_pandas()
    frame[frame.layer == 8].sort_values("probability", ascending=False)

A frame has one row per cell (a layer, a head, a position, ...) and named columns, so a
result filters, groups and writes to CSV as any other table. pandas is imported when a
table is asked for, not with the package.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def table(columns: dict[str, Any]):
    """A `pandas.DataFrame` of ``columns`` (name -> one value per row), in their order."""
    import pandas

    return pandas.DataFrame(columns)


def cells(axes: dict[str, Any], values: dict[str, Any], labels: dict[str, tuple[str, Any]] | None = None):
    """One row per cell of arrays laid out along ``axes``.

    Args:
        axes: column name -> that axis's coordinates (a layer's index, a position, ...),
            in the arrays' axis order.
        values: column name -> an array of the cells' shape (or one that broadcasts to it).
        labels: column name -> ``(axis name, one label per coordinate)``: a label of the
            axis (a position's token text).

    Returns:
        A `pandas.DataFrame`: the axes' columns, then the labels', then the values'.
    """
    coordinates = [np.asarray(c) for c in axes.values()]
    shape = tuple(len(c) for c in coordinates)
    index = np.indices(shape).reshape(len(shape), -1) if shape else np.zeros((0, 1), dtype=int)
    names = list(axes)
    frame = {name: coordinates[i][index[i]] for i, name in enumerate(names)}
    for name, (axis, per) in (labels or {}).items():
        frame[name] = np.asarray(per, dtype=object)[index[names.index(axis)]]
    for name, value in values.items():
        frame[name] = np.broadcast_to(np.asarray(value), shape).reshape(-1)
    return table(frame)


def stacked(frames: dict[str, Any], column: str):
    """Frames one under another, each row saying which it came from in ``column``."""
    import pandas

    return pandas.concat([frame.assign(**{column: name}) for name, frame in frames.items()], ignore_index=True)
