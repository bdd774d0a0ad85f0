"""First paint: how soon the explorer draws something, against the engine's start.

    python bench/first_paint.py

Each run is a fresh process (imports count: a new kernel pays them). `first_paint_child.py`
opens the explorer on the trained model and times, from the process's start: the
package imported, the tree described, the first paint (the tree with the prompt's shapes
and token chips), the engine ready, the first answer. The baseline, in the same run:
`StandardizedVLLM(trained())` started alone in a fresh process (`start_child.py`), today's
start. Targets (issue 28): first paint under 10 s; the engine's start at most 0.6x
the baseline.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from common import report
from engine_start import start_and_close

CHILD = Path(__file__).resolve().parent / "first_paint_child.py"


def explorer_phases(settings: dict | None = None) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        result = Path(folder) / "result.json"
        with open(Path(folder) / "log.txt", "w") as log:
            subprocess.run(
                [sys.executable, str(CHILD), str(result), json.dumps(settings or {})],
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=600,
            )
        if not result.exists():
            raise RuntimeError(f"explorer start failed:\n{(Path(folder) / 'log.txt').read_text()[-2000:]}")
        return json.loads(result.read_text())


def main(repeat: int = 2) -> str:
    from nnterp_widgets.checkpoints import trained

    path = str(trained())  # converted once, outside the timed runs
    baseline = min(start_and_close("standardized", path)[0] for _ in range(repeat))
    runs = [explorer_phases() for _ in range(repeat)]
    best = {key: min(run[key] for run in runs) for key in runs[0] if not isinstance(runs[0][key], bool)}
    rows = [(f"explorer: {key}", f"{value:.1f} s") for key, value in best.items()]
    rows += [
        ("explorer painted before the engine was ready", str(all(run["painted before ready"] for run in runs))),
        ("baseline: StandardizedVLLM start alone", f"{baseline:.1f} s"),
        ("first paint / baseline start", f"{best['first paint'] / baseline:.2f}"),
        ("engine ready / baseline start", f"{best['engine ready'] / baseline:.2f}"),
    ]
    return report(f"First paint on the trained model (best of {repeat}, fresh process each)", rows)


if __name__ == "__main__":
    main()
