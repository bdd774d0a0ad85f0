"""A patching sweep's cells crossing to the engine's workers: stacked in one tensor (what
`interventions.patching` sends an engine call) against one tensor a cell (the baseline,
as it was before run 15's profile showed it costing 0.84 s of the 8B sweep's 4.8 s).

Times the kernel's pickling plus the worker's `_load_cells` (on the CPU: no device copy,
which on a GPU is one copy against one a cell) for one engine call of ``PATCH_CELLS``
cells of a stream row, Llama-3.1-8B's width in bfloat16; best of 5.

    python bench/cell_crossing.py
"""

from __future__ import annotations

import pickle
from types import SimpleNamespace

import torch

from common import best_seconds, report

WIDTH = 4096


def main() -> str:
    from nnterp_widgets.interventions.patching import _CELLS, _load_cells
    from nnterp_widgets.interventions.patching import PATCH_CELLS as CELLS

    rows_of = torch.randn(CELLS, 1, WIDTH).to(torch.bfloat16)
    part = [(index // 64, index % 64) for index in range(CELLS)]
    worker = SimpleNamespace(device=torch.device("cpu"))

    def stacked():
        _load_cells(worker, pickle.dumps((part, rows_of)))

    def one_a_cell():
        cells = pickle.loads(pickle.dumps([(i, *place, rows_of[i].clone()) for i, place in enumerate(part)]))
        _CELLS.clear()
        _CELLS.extend(cells)

    base, ours = best_seconds(one_a_cell), best_seconds(stacked)
    _CELLS.clear()
    return report(
        f"A sweep's cells crossing to the workers ({CELLS} cells of {WIDTH} bfloat16, CPU)",
        [
            ("one tensor a cell (baseline)", f"{base * 1e3:.1f} ms"),
            ("stacked in one tensor", f"{ours * 1e3:.1f} ms"),
            ("stacked / baseline", f"{ours / base:.2f}"),
        ],
    )


if __name__ == "__main__":
    main()
