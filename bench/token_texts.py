"""What a result's token texts cost the kernel: a lens grid's ids to nested texts.

    python bench/token_texts.py

The trained model's tokenizer; a ``[32, 36, 5]`` grid of ids (the 8B's lens at 512 tokens
has this many cells) and a ``[32, 1, 5]`` one (a dataset prompt's, ``window=1``), ids drawn
with repeats as a lens's are. `requests.common.texts_of` (a table numpy indexes) against
the baseline in the same run: one cached Python lookup a cell (a dict, as before the
table). Both warm (every id decoded once already); medians of 50.
"""

from __future__ import annotations

import numpy as np
from common import median_seconds, report


def main() -> str:
    from transformers import AutoTokenizer

    from nnterp_widgets.checkpoints import trained
    from nnterp_widgets.requests.common import texts_of

    class Model:
        tokenizer = AutoTokenizer.from_pretrained(str(trained()))

    known: dict = {}

    def per_cell(ids: np.ndarray) -> tuple:
        def text(i: int) -> str:
            if i not in known:
                known[i] = Model.tokenizer.decode([i])
            return known[i]

        def nest(items):
            return tuple(nest(item) if isinstance(item, list) else text(item) for item in items)

        return nest(ids.tolist())

    rng = np.random.default_rng(0)
    rows = []
    for shape in [(32, 36, 5), (32, 1, 5)]:
        ids = rng.choice(rng.integers(0, 49152, size=1000), size=shape)  # repeats, as a lens's
        assert per_cell(ids) == texts_of(Model, ids)
        base = median_seconds(lambda: per_cell(ids), repeat=50, warmup=2) * 1e3
        table = median_seconds(lambda: texts_of(Model, ids), repeat=50, warmup=2) * 1e3
        rows.append((f"{shape}", f"per cell {base:.3f} ms, table {table:.3f} ms ({table / base:.2f}x)"))
    return report("Token texts of a lens grid (trained tokenizer, CPU)", rows)


if __name__ == "__main__":
    main()
