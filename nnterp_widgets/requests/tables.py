"""Results as tables: every result's ``to_pandas()`` builds its frame here.

    frame = session.lens("The Eiffel Tower is in").result().to_pandas()
    frame[frame.layer == 8].sort_values("probability", ascending=False)

A frame has one row per cell (a layer, a head, a position, ...) and named columns, so a
result filters, groups and writes to CSV as any other table. pandas is imported when a
table is asked for, not with the package.
"""

from __future__ import annotations

from typing import Any


def table(columns: dict[str, Any]):
    """A `pandas.DataFrame` of ``columns`` (name -> one value per row), in their order."""
    import pandas

    return pandas.DataFrame(columns)
