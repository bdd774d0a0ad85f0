"""Engine start: StandardizedVLLM vs a raw `vllm.LLM` on the same checkpoint.

Each start runs in a fresh subprocess (vLLM spawns its engine, and a second engine in
one process would share warm caches); the ratio is standardized / raw.
"""

from __future__ import annotations

import json
import subprocess
import sys

from common import report

CHILD = r"""
import json, os, sys, time
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
kind, path = sys.argv[1], sys.argv[2]
if __name__ == "__main__":
    start = time.perf_counter()
    if kind == "raw":
        from vllm import LLM
        llm = LLM(path, dtype="float32", gpu_memory_utilization=0.3, enforce_eager=True)
    else:
        from nnterp_widgets import StandardizedVLLM
        llm = StandardizedVLLM(path, dtype="float32", gpu_memory_utilization=0.3)
    print("RESULT", json.dumps({"seconds": time.perf_counter() - start}), flush=True)
    os._exit(0)
"""


def start_seconds(kind: str, path: str) -> float:
    out = subprocess.run([sys.executable, "-c", CHILD, kind, path], capture_output=True, text=True, timeout=600)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])["seconds"]
    raise RuntimeError(f"{kind} start failed:\n{out.stderr[-2000:]}")


def main(repeat: int = 2) -> str:
    from nnterp_widgets.checkpoints import checkpoint

    path = str(checkpoint("qwen2"))
    raw = min(start_seconds("raw", path) for _ in range(repeat))
    standardized = min(start_seconds("standardized", path) for _ in range(repeat))
    return report("Engine start (best of %d, fresh process each)" % repeat, [
        ("raw vllm.LLM", f"{raw:.1f} s"),
        ("StandardizedVLLM", f"{standardized:.1f} s"),
        ("ratio standardized / raw", f"{standardized / raw:.2f}"),
    ])


if __name__ == "__main__":
    main()
