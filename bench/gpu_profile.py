"""On a GPU: where the 8B shape's prompt request and patching sweep spend their time.

    python bench/gpu_profile.py [--checkpoint llama3.1_8b] [--tokens 8192] [--out DIR]

The engine runs in this process (``in_process=True``), so one profiler sees the kernel's
side, vLLM's engine core and the model's forward. Written to ``DIR/profile.md``:

1. the shown layer's pattern as arithmetic alone, on tensors of the model's shape: as the
   prompt request computes it (the whole ``[heads, tokens, tokens]`` in float32, then
   pooled) and a query-chunked variant (each chunk's probabilities pooled and dropped);
2. medians of the raw forward and the prompt request, then one prompt request under
   cProfile (Python: the kernel's side and nnsight's) and torch.profiler (CUDA kernels);
3. one request of the patching sweep (64 invokes) under the same two profilers, and the
   whole 32 x 64 sweep timed.
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

from gpu_prompt import bench_checkpoint, pair_of, prompt_of  # noqa: E402


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


def pattern_arithmetic(tokens: int, heads: int, kv_heads: int, head_dim: int, side: int) -> list[str]:
    import torch

    from nnterp_widgets.components.vllm.attention import recompute_scores
    from nnterp_widgets.requests.attention import THUMBNAIL_SIDE, pattern_block, pattern_payload

    torch.manual_seed(0)
    query = torch.randn(tokens, heads, head_dim, device=device(), dtype=torch.bfloat16)
    key = torch.randn(tokens, kv_heads, head_dim, device=device(), dtype=torch.bfloat16)
    scale = head_dim**-0.5
    block = pattern_block(tokens, side)
    thumb = -(-tokens // THUMBNAIL_SIDE)

    def whole():
        probabilities = torch.softmax(recompute_scores(query, key, scale).unsqueeze(0), dim=-1)
        return pattern_payload(probabilities, block)

    def scores_only():
        return recompute_scores(query, key, scale)

    def chunked(rows: int):
        step = rows - rows % (block * thumb // _gcd(block, thumb)) or block * thumb
        keys = key.repeat_interleave(heads // kv_heads, dim=1).float().permute(1, 2, 0)
        queries = (query.float() * scale).permute(1, 0, 2)
        position = torch.arange(tokens, device=device())
        cells, thumbs = [], []
        for start in range(0, tokens, step):
            part = torch.bmm(queries[:, start : start + step], keys)
            hidden = position[None, :] > position[start : start + step, None]
            part.masked_fill_(hidden, float("-inf"))
            part.sub_(part.amax(-1, keepdim=True)).exp_()
            part.div_(part.sum(-1, keepdim=True))
            cells.append(torch.nn.functional.max_pool2d(part, block, block, ceil_mode=True))
            thumbs.append(torch.nn.functional.avg_pool2d(part.unsqueeze(0), thumb, thumb, ceil_mode=True)[0])
        quantized = (torch.cat(cells, 1) * 255).round_().to(torch.uint8).cpu()
        return quantized, torch.cat(thumbs, 1).cpu()

    gpu = torch.cuda.is_available()
    base = torch.cuda.memory_allocated() if gpu else 0
    lines = [f"## 1. The pattern's arithmetic alone ({tokens} tokens, {heads}/{kv_heads} heads of {head_dim})", ""]
    lines.append("| variant | ms | peak extra GiB |")
    lines.append("|---|---|---|")
    reference = whole()
    for name, fn in (
        ("scores only (the float32 product, masked)", scores_only),
        ("as the request does it (scores, softmax, pooled, to the host)", whole),
        ("query chunks of 512", lambda: chunked(512)),
        ("query chunks of 1024", lambda: chunked(1024)),
        ("query chunks of 2048", lambda: chunked(2048)),
    ):
        if gpu:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        ms = cuda_ms(fn)
        peak = (torch.cuda.max_memory_allocated() - base) / 2**30 if gpu else float("nan")
        lines.append(f"| {name} | {ms:.1f} | {peak:.1f} |")
    same = chunked(1024)
    cells_diff = (same[0].int() - reference[0].int()).abs().max().item()
    thumbs_diff = (same[1] - reference[1]).abs().max().item()
    lines += [
        "",
        f"chunked (1024) against the request's: cells differ by at most {cells_diff}/255, "
        f"thumbnails by {thumbs_diff:.2e}",
        "",
    ]
    return lines


def _gcd(a: int, b: int) -> int:
    import math

    return math.gcd(a, b)


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
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    args = parser.parse_args()
    out = Path(args.out) / "profile.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []

    def flush() -> None:
        out.write_text("\n".join(lines) + "\n")

    from nnterp_widgets.session import Session
    from nnterp_widgets.interventions.patching import PATCH_INVOKES, _read_clean, _sweep
    from nnterp_widgets.requests.attention import PATTERN_SIDE

    path = bench_checkpoint(args.checkpoint)
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(path)
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    lines += pattern_arithmetic(args.tokens, heads, kv_heads, head_dim, PATTERN_SIDE)
    flush()

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
        pair = [answer, foil]

        def one_request(engine):
            first = _read_clean(engine, clean, corrupted, "layer_output", pair)
            cells = [(layer, column % args.sweep) for layer in range(2) for column in range(PATCH_INVOKES // 2)]
            slices = [first["values"][layer][:, column].clone() for layer, column in cells]
            label = f"one sweep request ({PATCH_INVOKES} invokes of {args.sweep} tokens)"
            return profiled(lambda: _sweep(engine, corrupted, "layer_output", pair, cells, slices), label)

        lines += ["## 3. The patching sweep", ""]
        lines += session.request(one_request, key="profile-sweep").result()
        flush()
        start = time.perf_counter()
        try:
            result = session.patch(clean, corrupted, answer, foil).result()
            took = time.perf_counter() - start
            lines += [f"whole sweep {tuple(result.patched.shape)}: {took:.1f} s in {result.requests} requests"]
        except Exception as error:  # noqa: BLE001 - a result too
            lines += [f"whole sweep failed: {error!r}"]
    flush()
    session.close()


if __name__ == "__main__":
    main()
