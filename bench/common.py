"""Shared helpers for the benchmarks: a tiny engine, timing, RSS, checkpoints and prompts."""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

ENGINE_KWARGS = dict(dtype="float32", gpu_memory_utilization=0.3)


def median_seconds(fn: Callable[[], object], repeat: int = 20, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def best_seconds(fn: Callable[[], object], repeat: int = 5) -> float:
    """The fastest of ``repeat`` runs of ``fn``, in seconds (for host work whose noise is
    only ever slower)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def rss_bytes(pid: int | None = None) -> int:
    import psutil

    return psutil.Process(pid or os.getpid()).memory_info().rss


def tree_rss_bytes(pid: int | None = None) -> int:
    """RSS of a process and all its children (vLLM runs its engine in child processes)."""
    import psutil

    process = psutil.Process(pid or os.getpid())
    total = process.memory_info().rss
    for child in process.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def report(title: str, rows: list[tuple[str, str]]) -> str:
    width = max(len(name) for name, _ in rows)
    lines = [f"## {title}", ""] + [f"    {name.ljust(width)}  {value}" for name, value in rows]
    text = "\n".join(lines)
    print(text, flush=True)
    return text


def vllm_prefill(prompts: list[str]) -> Callable:
    """vLLM's own prefill of ``prompts`` (``LLM.generate``, one token each): the floor a
    batch of engine requests is compared with. Returns a ``session.request`` function."""

    def run(engine):
        from vllm import SamplingParams

        return engine.vllm_entrypoint.generate(prompts, SamplingParams(max_tokens=1, temperature=0.0), use_tqdm=False)

    return run


def bench_checkpoint(name: str = "qwen2_0.5b") -> str:
    """The checkpoint's path: ``qwen2_0.5b`` (the project's bench checkpoint, float32),
    ``llama3.1_8b`` (Llama-3.1-8B's shape, bfloat16, built on the GPU: bench/gpu_build.py)
    or ``trained`` (the trained model, `checkpoints.trained`)."""
    if name == "trained":
        from nnterp_widgets.checkpoints import trained

        return str(trained())
    if name == "llama3.1_8b":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from gpu_build import build

        return str(build(name, os.environ.get("BENCH_ROOT", "/tmp/bench-checkpoints")))
    from nnterp_widgets.checkpoints import bench_checkpoint as build

    return str(build(name))


def dataset_prompts(count: int) -> list[str]:
    """``count`` distinct prompts of about 32 tokens."""
    words = "the capital of every country in the world has a name that people learn at school".split()
    return [
        f"Note {i}: " + " ".join(words[(i + j) % len(words)] for j in range(24)) + " and the answer is"
        for i in range(count)
    ]
