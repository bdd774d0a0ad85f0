"""Engine start: StandardizedVLLM vs a raw `vllm.LLM` on the same checkpoint.

Each start runs in a fresh subprocess (vLLM spawns its engine, and a second engine in
one process would share warm caches); the ratio is standardized / raw.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import sys
from pathlib import Path

from common import report

CHILD = Path(__file__).resolve().parent / "start_child.py"


def start_and_close(kind: str, path: str) -> tuple[float, float]:
    # The result comes back in a file: vLLM's engine processes inherit the child's
    # pipes, so reading its stdout to EOF would wait on them too.
    with tempfile.TemporaryDirectory() as folder:
        result = Path(folder) / "result.json"
        with open(Path(folder) / "log.txt", "w") as log:
            subprocess.run(
                [sys.executable, str(CHILD), kind, path, str(result)], stdout=log, stderr=subprocess.STDOUT, timeout=600
            )
        if not result.exists():
            raise RuntimeError(f"{kind} start failed:\n{(Path(folder) / 'log.txt').read_text()[-2000:]}")
        timed = json.loads(result.read_text())
        return timed["seconds"], timed["close"]


def main(repeat: int = 2) -> str:
    from nnterp_widgets.checkpoints import checkpoint

    path = str(checkpoint("qwen2"))
    # Best of each: starts and closes are timed apart, so each column's minimum.
    raw_start, raw_close = map(min, zip(*(start_and_close("raw", path) for _ in range(repeat)), strict=True))
    start, close = map(min, zip(*(start_and_close("standardized", path) for _ in range(repeat)), strict=True))
    return report(
        "Engine start and close (best of %d, fresh process each)" % repeat,
        [
            ("raw vllm.LLM start", f"{raw_start:.1f} s"),
            ("StandardizedVLLM start", f"{start:.1f} s"),
            ("ratio standardized / raw", f"{start / raw_start:.2f}"),
            ("raw close (vLLM's shutdown)", f"{raw_close:.1f} s"),
            ("StandardizedVLLM.close", f"{close:.1f} s"),
        ],
    )


if __name__ == "__main__":
    main()
