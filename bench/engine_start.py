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


def start_seconds(kind: str, path: str) -> float:
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
        return json.loads(result.read_text())["seconds"]


def main(repeat: int = 2) -> str:
    from nnterp_widgets.checkpoints import checkpoint

    path = str(checkpoint("qwen2"))
    raw = min(start_seconds("raw", path) for _ in range(repeat))
    standardized = min(start_seconds("standardized", path) for _ in range(repeat))
    return report(
        "Engine start (best of %d, fresh process each)" % repeat,
        [
            ("raw vllm.LLM", f"{raw:.1f} s"),
            ("StandardizedVLLM", f"{standardized:.1f} s"),
            ("ratio standardized / raw", f"{standardized / raw:.2f}"),
        ],
    )


if __name__ == "__main__":
    main()
