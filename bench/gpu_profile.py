"""On a GPU: where the 8B shape's prompt request and patching sweep spend their time.

    python bench/gpu_profile.py [--checkpoint llama3.1_8b] [--tokens 8192] [--out DIR]

The engine runs in this process (``in_process=True``), so one profiler sees the kernel's
side, vLLM's engine core and the model's forward. Written to ``DIR/profile.md``:

2. medians of the raw forward and the prompt request, then one prompt request under
   cProfile (Python: the kernel's side and nnsight's) and torch.profiler (CUDA kernels);
3. the patching sweep under the same two profilers (one engine request), then timed;
4. with ``--dataset N``: one batch request of ``N`` prompts (``each(prompts).prompt``'s,
   an invoke a prompt) under the same profilers, beside vLLM's own prefill of them.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import bench_checkpoint  # noqa: E402
from gpu_prompt import pair_of, prompt_of  # noqa: E402


def device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"  # the CPU: a dry run of this script


def synchronize() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def cuda_ms(fn, repeat: int = 3) -> float:
    fn()
    synchronize()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        synchronize()
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


def profiled(fn, label: str) -> list[str]:
    """``fn()`` once under cProfile and torch.profiler, on the thread that runs it."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    python = cProfile.Profile()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=activities) as prof:
        python.enable()
        start = time.perf_counter()
        fn()
        synchronize()
        took = (time.perf_counter() - start) * 1e3
        python.disable()
    text = io.StringIO()
    stats = pstats.Stats(python, stream=text)
    stats.sort_stats("cumulative").print_stats(45)
    kernels = prof.key_averages().table(
        sort_by="self_cuda_time_total" if torch.cuda.is_available() else "self_cpu_time_total",
        row_limit=25,
        max_name_column_width=70,
    )
    cpu = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20, max_name_column_width=70)
    return [
        f"### {label}: {took:.0f} ms under the profilers",
        "",
        "CUDA time by kernel/op (self):",
        "```",
        kernels,
        "```",
        "CPU time by op (self):",
        "```",
        cpu,
        "```",
        "Python (cProfile, cumulative):",
        "```",
        text.getvalue()[-12000:],
        "```",
        "",
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint", default="llama3.1_8b")
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--sweep", type=int, default=64, help="positions of the timed patching sweep (0: none)")
    parser.add_argument("--dataset", type=int, default=0, help="prompts of the profiled batch request (0: none)")
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    args = parser.parse_args()
    out = Path(args.out) / "profile.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []

    def flush() -> None:
        out.write_text("\n".join(lines) + "\n")

    from nnterp_widgets.session import Session
    from nnterp_widgets.interventions.patching import patch

    path = bench_checkpoint(args.checkpoint)

    started = time.perf_counter()
    settings = dict(progress=False, max_model_len=args.tokens + 64, gpu_memory_utilization=0.5)
    try:
        session = Session.open(path, in_process=True, **settings).wait()
    except Exception as error:  # noqa: BLE001 - then the kernel's side alone
        lines += [f"in-process start failed ({error!r}); multiprocess: the profilers see the kernel's side only", ""]
        session = Session.open(path, in_process=False, **settings).wait()
    lines += [
        f"## 2. The prompt request ({args.checkpoint}, {args.tokens} tokens, {session.device}, "
        f"{session.dtype}, engine in this process, started in {time.perf_counter() - started:.0f} s)",
        "",
    ]
    text = prompt_of(session.tokenizer(), args.tokens)

    def raw(engine):
        with engine.trace(text, temperature=0.0, max_tokens=1):
            logits = engine.logits.cpu().save()
        return logits

    def median(fn) -> float:
        fn()
        samples = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - start) * 1e3)
        return statistics.median(samples)

    raw_ms = median(lambda: session.request(raw, key="raw").result())
    prompt_ms = median(lambda: session.prompt(text, key=f"p{time.perf_counter()}").result())
    lines += [f"raw forward {raw_ms:.0f} ms, prompt request {prompt_ms:.0f} ms (medians of {args.repeat})", ""]
    flush()
    from nnterp_widgets.requests.prompt import run_prompt

    lines += session.request(
        lambda engine: profiled(lambda: run_prompt(engine, text), "prompt request"), key="profile"
    ).result()
    lines += session.request(lambda engine: profiled(lambda: raw(engine), "raw forward"), key="profile-raw").result()
    flush()

    if args.sweep:
        clean, corrupted = pair_of(session.tokenizer(), args.sweep)
        answer = int(session.prompt(clean).result().lens.model_top_ids[0])
        foil = int(session.prompt(corrupted).result().lens.model_top_ids[0])
        if foil == answer:
            foil = answer + 1  # random weights may answer both alike: any other token

        def one_sweep(engine):
            return profiled(
                lambda: patch(engine, clean, corrupted, answer, foil), "the whole sweep, one engine request"
            )

        lines += ["## 3. The patching sweep", ""]
        lines += session.request(one_sweep, key="profile-sweep").result()
        flush()
        start = time.perf_counter()
        try:
            result = session.patch(clean, corrupted, answer, foil).result()
            took = time.perf_counter() - start
            lines += [f"whole sweep {tuple(result.patched.shape)}: {took:.1f} s in {result.requests} requests"]
        except Exception as error:  # noqa: BLE001 - a result too
            lines += [f"whole sweep failed: {error!r}"]
    flush()
    if args.dataset:
        lines += dataset_profile(session, args.dataset)
        flush()
    session.close()


def dataset_profile(session, count: int) -> list[str]:
    """One batch request of ``count`` prompts of about 32 tokens, timed and profiled,
    against vLLM's own prefill of the same prompts."""
    from common import dataset_prompts

    from nnterp_widgets import requests

    prompts = dataset_prompts(count)

    def batch(engine):
        def prepare(model, index, prompt):
            return requests.prompt_plan(model, prompt, window=1)

        return requests.run_each(engine, prompts, requests.PROMPT_QUESTION, prepare, most=count)

    def prefill(engine):
        from vllm import SamplingParams

        return engine.vllm_entrypoint.generate(prompts, SamplingParams(max_tokens=1, temperature=0.0), use_tqdm=False)

    def timed(fn) -> float:
        return session.request(lambda engine: cuda_ms(lambda: fn(engine)), key=f"t{time.perf_counter()}").result()

    batch_ms, prefill_ms = timed(batch), timed(prefill)
    lines = [
        f"## 4. One batch request of {count} prompts (each(prompts).prompt(window=1)'s)",
        "",
        f"batch request {batch_ms:.0f} ms ({batch_ms / count:.1f} ms a prompt); vLLM's prefill of the same "
        f"prompts {prefill_ms:.0f} ms: {prefill_ms / batch_ms:.0%} of vLLM's throughput",
        "",
    ]
    label = f"one batch request ({count} prompts)"
    return lines + session.request(lambda engine: profiled(lambda: batch(engine), label), key="profile-batch").result()


if __name__ == "__main__":
    main()
