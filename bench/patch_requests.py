"""Engine calls and wall time of an activation-patching sweep: many cells an engine call
vs one.

The sweep (`Session.patch`) reads the clean values in one request, then streams up to
``PATCH_CELLS`` cells an engine call, a plain vLLM request each under one registered
block; the baseline is the same sweep with one cell an engine call (``chunk=1``), which
is how a per-cell tool asks. Both maps are checked equal; ratios are within this run.
"""

from __future__ import annotations

import time

from common import ENGINE_KWARGS, report

# 27 tokens each on the tiny checkpoint's tokenizer; the answer and foil are one token each.
CLEAN = "The Eiffel Tower, a tower of iron that stands by the river, is in the city of"
CORRUPTED = "The Colosseum Tower, a tower of iron that stands by the river, is in the city of"
ANSWER, FOIL = " Paris", " Rome"
REPEAT = 3


def _sweep(session, site: str, chunk: int):
    from nnterp_widgets.interventions.patching import patch

    best, result = float("inf"), None
    for _ in range(REPEAT):
        start = time.perf_counter()
        result = session.request(
            lambda engine: patch(engine, CLEAN, CORRUPTED, ANSWER, FOIL, site=site, chunk=chunk), key="bench-patch"
        ).result()
        best = min(best, time.perf_counter() - start)
    return result, best


def main() -> str:
    import numpy as np

    from nnterp_widgets.checkpoints import checkpoint
    from nnterp_widgets.session import Session
    from nnterp_widgets.interventions.patching import PATCH_CELLS

    session = Session.open(checkpoint("qwen2"), progress=False, **ENGINE_KWARGS).wait()
    rows = []
    try:
        for site in ("layer_output", "attention_head_outputs"):
            batched, batched_s = _sweep(session, site, PATCH_CELLS)
            single, single_s = _sweep(session, site, 1)
            np.testing.assert_allclose(batched.patched, single.patched, atol=1e-5)
            cells = batched.patched.size
            rows += [
                (f"{site}: cells ({batched.num_layers} layers x {batched.patched.shape[1]})", f"{cells}"),
                (f"{site}: requests batched / per cell", f"{batched.requests} / {single.requests}"),
                (
                    f"{site}: wall time batched / per cell (best of {REPEAT})",
                    f"{batched_s * 1e3:.0f} ms / {single_s * 1e3:.0f} ms",
                ),
                (f"{site}: request ratio batched / per cell", f"{batched.requests / single.requests:.2f}"),
                (f"{site}: wall-time ratio batched / per cell", f"{batched_s / single_s:.2f}"),
            ]
    finally:
        session.close()
    return report(f"Activation patching: requests per sweep ({len(batched.clean)} tokens)", rows)


if __name__ == "__main__":
    from pathlib import Path

    text = main()
    results = Path(__file__).resolve().parent / "RESULTS.md"
    results.write_text(results.read_text().rstrip("\n") + "\n\n" + text + "\n")
