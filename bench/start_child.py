"""One engine start and close, timed, in a fresh process (used by engine_start.py)."""

import json
import os
import sys
import time

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

if __name__ == "__main__":
    kind, path, out = sys.argv[1], sys.argv[2], sys.argv[3]
    start = time.perf_counter()
    if kind == "raw":
        from vllm import LLM

        engine = LLM(path, dtype="float32", gpu_memory_utilization=0.3, enforce_eager=True)
    else:
        from nnterp_widgets import StandardizedVLLM

        engine = StandardizedVLLM(path, dtype="float32", gpu_memory_utilization=0.3)
    seconds = time.perf_counter() - start
    # Shut the engine's processes down, so none outlives this one: vLLM's own shutdown
    # for the raw engine, `close` for ours; timed too.
    start = time.perf_counter()
    if kind == "raw":
        engine.llm_engine.engine_core.shutdown()
    else:
        engine.close()
    closed = time.perf_counter() - start
    with open(out, "w") as handle:
        json.dump({"seconds": seconds, "close": closed}, handle)
