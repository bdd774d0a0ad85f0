"""On a GPU: the explorer's prompt request vs the raw forward, 0.5B shape, 512 and 4,096 tokens.

    python bench/gpu_prompt.py [--out OUT] [--tokens 512,4096] [--dtype auto] [--repeat 5]

One session on a Qwen2.5-0.5B-shaped checkpoint (`bench_checkpoint`); per prompt length,
the median of ``session.prompt(text)`` (everything the explorer asks for one prompt)
against the median of the raw forward through the same session (one trace saving only
the logits), both waited for to the end. Ratio > 1: what the explorer costs per prompt
on top of the forward. Also the bytes the prompt request returns (its pickled result)
and one zoom: the exact cells of the last `PATTERN_SIDE` tokens of the shown layer (one
request, as a click on a pooled cell asks). Targets (issue 13): 512 tokens under 100 ms, 4,096 under 3x the
raw forward. Writes ``OUT/gpu_prompt.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from common import bench_checkpoint, dataset_prompts

TARGET_MS_512 = 100
#: Seconds one request may take before it counts as failed (a dead engine never answers).
REQUEST_TIMEOUT_S = 60
TARGET_RATIO_4096 = 3.0


def pair_of(tokenizer, tokens: int) -> tuple[str, str]:
    """Two prompts of ``tokens`` tokens that differ in their second token (a patching pair)."""
    ids = tokenizer(prompt_of(tokenizer, tokens))["input_ids"][:tokens]
    other = list(ids)
    other[1] = tokenizer(" Rome", add_special_tokens=False)["input_ids"][0]
    return tokenizer.decode(ids), tokenizer.decode(other)


def prompt_of(tokenizer, tokens: int) -> str:
    """A text of exactly ``tokens`` tokens (checked after re-encoding)."""
    words = "The Eiffel Tower is in Paris and the Colosseum is in Rome while the river runs by . "
    text = words
    while len(tokenizer(text)["input_ids"]) < tokens + 8:
        text += words
    ids = tokenizer(text)["input_ids"][:tokens]
    text = tokenizer.decode(ids)
    got = len(tokenizer(text)["input_ids"])
    if abs(got - tokens) > 4:
        raise RuntimeError(f"could not build a {tokens}-token prompt (re-encodes to {got})")
    return text


def _raw_forward(text: str):
    def run(engine):
        with engine.trace(text, temperature=0.0, max_tokens=1):
            logits = engine.logits.save()
        return logits

    return run


def _peak_raw(text: str):
    """The raw forward, with the GPU memory allocated in the worker before it and at its peak."""

    def run(engine):
        import torch

        with engine.trace(text, temperature=0.0, max_tokens=1):
            out = dict().save()
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            out["before"] = torch.cuda.memory_allocated()
            out["logits"] = engine.logits[0, -1].argmax().item()
            torch.cuda.synchronize()
            out["peak"] = torch.cuda.max_memory_allocated()
        return out

    return run


def _peak_pattern(text: str, layer: int, block: int, rows_bytes: int | None = None):
    """The shipped pattern's recomputation (`pattern_payload`, as the prompt request runs
    it, ``rows_bytes`` of rows at a time), with the GPU memory allocated in the worker
    before it and at its peak, and its time on the worker."""

    def run(engine):
        import time

        import torch

        from nnterp_widgets.requests.attention import pattern_payload

        with engine.trace(text, temperature=0.0, max_tokens=1):
            out = dict().save()
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            out["before"] = torch.cuda.memory_allocated()
            attention = engine.layers[layer].self_attn
            queries, keys = attention.attention_queries, attention.attention_keys
            torch.cuda.synchronize()
            start = time.perf_counter()
            out["pattern"] = pattern_payload(attention, queries, keys, block, rows_bytes=rows_bytes)
            torch.cuda.synchronize()
            out["ms"] = (time.perf_counter() - start) * 1e3
            out["peak"] = torch.cuda.max_memory_allocated()
        return out

    return run


#: The row blocks timed beside the GPU's default (`GPU_ROWS_BYTES`): what a block's size costs.
ROWS_BYTES_TRIED = (64 * 2**20, 256 * 2**20, 4096 * 2**20)


def peak_row(session, text: str, layer: int) -> dict:
    """What the shipped pattern adds to the forward's peak GPU memory (the worker's
    allocator) against the raw forward's own peak (issue 39's 2 GB bound), and the
    pattern's time on the worker at the default row block and at `ROWS_BYTES_TRIED`."""
    from nnterp_widgets.requests.attention import GPU_ROWS_BYTES, pattern_block

    tokens = len(session.tokens(text))
    raw = session.request(_peak_raw(text), key="peak").result(600)
    found = {"raw_peak_over_start_mb": round((raw["peak"] - raw["before"]) / 2**20, 1)}
    for rows_bytes in (None, *ROWS_BYTES_TRIED):
        name = "" if rows_bytes is None else f"_{rows_bytes // 2**20}mb"
        try:
            runs = [
                session.request(_peak_pattern(text, layer, pattern_block(tokens), rows_bytes), key="peak").result(600)
                for _ in range(3)
            ]
        except Exception as error:  # noqa: BLE001 - a block too large for the GPU is a result
            found[f"pattern{name}_error"] = repr(error)[:200]
            continue
        found[f"pattern{name}_ms"] = round(sorted(run["ms"] for run in runs)[1], 1)
        found[f"pattern{name}_over_raw_mb"] = round((runs[-1]["peak"] - raw["peak"]) / 2**20, 1)
    found["rows_bytes_default_mb"] = GPU_ROWS_BYTES // 2**20
    return found


def side_rows(session, text: str, sides: list[int], repeat: int) -> dict:
    """The prompt request with the shown pattern pooled to each of ``sides`` cells a side
    (`Session.pattern_side`), its median and the bytes it returns: the same recompute on
    the worker, less to pool and ship, so the difference is what shipping costs."""
    kept, found = session.pattern_side, {}
    try:
        for side in sides:
            session.pattern_side = side
            results = []
            ms, samples = median_ms(lambda: results.append(session.prompt(text).result(REQUEST_TIMEOUT_S)), repeat)
            found[side] = {
                "prompt_ms": round(ms, 1),
                "samples": [round(s, 1) for s in samples],
                "returned_mb": round(len(pickle.dumps(results[-1])) / 1e6, 2),
            }
    finally:
        session.pattern_side = kept
    return found


def median_ms(fn, repeat: int) -> tuple[float, list[float]]:
    fn()  # warm-up (first use of a length compiles/allocates)
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples), samples


def write(out: Path, meta: dict, rows: list[dict], repeat: int) -> list[str]:
    """``gpu_prompt.json`` and ``.md`` for what is measured so far (a run cut short keeps it)."""
    (out / "gpu_prompt.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    lines = [
        f"# Prompt request vs raw forward on {meta['device']}, {meta['dtype']}, {meta.get('name', 'Qwen2.5-0.5B shape')}",
        "",
        f"median of {repeat} after one warm-up; engine start {meta['engine_start_s']} s; "
        f"targets: 512 tokens under {TARGET_MS_512} ms, 4,096 under {TARGET_RATIO_4096}x the raw forward",
        "",
        "| tokens | raw forward ms | prompt request ms | ratio | MB returned | zoom ms | row ms | pattern ms (worker) | pattern MB over raw peak | note |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['tokens']} | | | | | | | | | {row['error'].replace('|', '/')} |")
            continue
        note = ""
        if row["tokens"] == 512:
            note = "target met" if row["prompt_ms"] < TARGET_MS_512 else "over the 100 ms target"
        elif row["tokens"] == 4096:
            note = "target met" if row["ratio"] < TARGET_RATIO_4096 else "over the 3x target"
        lines.append(
            f"| {row['tokens']} | {row['raw_ms']} | {row['prompt_ms']} | {row['ratio']} | "
            f"{row.get('returned_mb', '')} | {row.get('zoom_ms', '')} | {row.get('row_ms', '')} | "
            f"{row.get('pattern_ms', '')} | {row.get('pattern_over_raw_mb', '')} | {note} |"
        )
    for row in rows:
        for side, found in row.get("sides", {}).items():
            lines.append(
                f"\n{row['tokens']} tokens, the pattern pooled to {side} a side: {found['prompt_ms']} ms, "
                f"{found['returned_mb']} MB returned (raw forward {row.get('raw_ms')} ms)"
            )
    for extra in (
        "generate_ms",
        "patch",
        "guard",
        "generation",
        "dataset",
        *[key for key in meta if key.startswith("patch_chunk_")],
    ):
        if extra in meta:
            lines.append(f"\n{extra}: {meta[extra]}")
    (out / f"gpu_prompt_{meta.get('name', 'qwen2_0.5b')}.md").write_text("\n".join(lines) + "\n")
    (out / "gpu_prompt.md").write_text("\n".join(lines) + "\n")
    return lines


def guard_row(session, text: str) -> dict:
    """The memory guard on the GPU: every layer's whole pattern of the longest prompt
    (`Session.patterns`, three copies of ``heads x tokens²`` floats a layer) is refused
    before it runs, saying what fits; the engine serves the next request."""
    from nnterp_widgets.session.memory import free_bytes

    start = time.perf_counter()
    try:
        session.patterns(text).result(600)
        row = {"refused": False}
    except Exception as error:  # noqa: BLE001 - the refusal is the result
        row = {"refused": type(error).__name__, "message": str(error)[:400]}
    row.update(seconds=round(time.perf_counter() - start, 2), free_gb=round((free_bytes() or 0) / 1e9, 1))
    row["next_request_tokens"] = len(session.prompt("The capital of France is").result(REQUEST_TIMEOUT_S).tokens)
    print(f"[bench] guard: {row}", flush=True)
    return row


def generation_floors(session, counts: list[int]) -> dict:
    """`session.generate` of N tokens against vLLM's own generate and the raw nnsight
    trace with the lens's one product a step (bench/generation.py's floors), medians of 3."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from generation import PROMPT, raw_trace, vllm_generate

    found = {}
    for tokens in counts:
        row = {}
        for name, fn in (
            ("vllm_ms", lambda: session.request(vllm_generate(tokens)).result(REQUEST_TIMEOUT_S)),
            ("raw_ms", lambda: session.request(raw_trace(tokens, lens=False)).result(REQUEST_TIMEOUT_S)),
            ("floor_ms", lambda: session.request(raw_trace(tokens, lens=True)).result(REQUEST_TIMEOUT_S)),
            ("generate_ms", lambda: session.generate(PROMPT, tokens, min_tokens=tokens).result(REQUEST_TIMEOUT_S)),
        ):
            row[name] = round(median_ms(fn, 3)[0], 1)
        row["generate_over_floor"] = round(row["generate_ms"] / row["floor_ms"], 2)
        row["vllm_tokens_per_s"] = round(tokens / row["vllm_ms"] * 1e3, 1)
        found[tokens] = row
        print(f"[bench] generation {tokens} tokens: {row}", flush=True)
    return found


def registered_floor(prompts: list[str]):
    """The registration path's floor (``model.edit()``): one block installed on the engine
    saving the model's top-5 only, vLLM's own ``generate`` over every prompt."""

    def run(engine):
        from vllm import SamplingParams

        with engine.edit() as (_, edit):
            # nnsight keys a registered edit's saves by the variable's name.
            got = engine.logits[0, -1].topk(5).indices.cpu().numpy().save()  # noqa: F841
        try:
            outs = engine.vllm_entrypoint.generate(
                prompts, SamplingParams(max_tokens=1, temperature=0.0), use_tqdm=False
            )
        finally:
            edit.clear()
        assert all("got" in out.saves for out in outs), "a request came back without its saves"
        return len(outs)

    return run


def dataset_rows(session, tokenizer, count: int, singles: int) -> dict:
    """``session.each(prompts).prompt(window=1)`` over ``count`` prompts of about 32 tokens
    against vLLM's own prefill of the same prompts (``LLM.generate``, ``max_tokens=1``)
    and ``singles`` single prompt requests (scaled to ``count``)."""
    prompts = dataset_prompts(count)
    lengths = [len(tokenizer(p)["input_ids"]) for p in prompts]

    from common import vllm_prefill

    from nnterp_widgets.requests import batches

    vllm_s = median_ms(lambda: session.request(vllm_prefill(prompts)).result(600), 3)[0] / 1e3
    print(f"[bench] dataset: vLLM's own prefill {vllm_s:.2f} s", flush=True)
    found = {}
    # Registered first (the default path, target 3's number), printed as soon as it lands: a
    # run cut short by the device still reports it. A failure is a result; the invokes follow.
    shared = None
    try:
        each_s = median_ms(lambda: session.each(prompts).prompt(window=1).result(600), 3)[0] / 1e3
        shared = session.each(prompts[:64]).prompt(window=1).result(600)
        print(f"[bench] dataset: registered {each_s:.2f} s, vLLM's prefill {vllm_s / each_s:.0%} of it", flush=True)
    except Exception as error:  # noqa: BLE001
        found["registered_error"] = traceback.format_exc()[-1500:]
        print(f"[bench] dataset: registered failed: {error!r}", flush=True)
        each_s = None
    shared_at, batches.REGISTER_AT = batches.REGISTER_AT, 10**9  # every prompt an invoke, as before registrations
    try:
        found["each_invokes_s"] = round(
            median_ms(lambda: session.each(prompts).prompt(window=1).result(600), 3)[0] / 1e3, 2
        )
        invoked = session.each(prompts[:64]).prompt(window=1).result(600)
    finally:
        batches.REGISTER_AT = shared_at
    print(f"[bench] dataset: {found}", flush=True)
    if each_s is None:
        each_s = found["each_invokes_s"]
    if shared is not None:
        pairs = list(zip(shared, invoked, strict=True))
        found["registered_vs_invokes"] = {
            "prompts": len(pairs),
            "errors": [len(shared.errors), len(invoked.errors)],
            "same_model_top1": sum(int(a.lens.model_top_ids[0] == b.lens.model_top_ids[0]) for a, b in pairs),
            "same_lens_top1": round(
                float(np.mean([np.mean(a.lens.top_ids[..., 0] == b.lens.top_ids[..., 0]) for a, b in pairs])), 4
            ),
            "max_prob_diff": round(
                float(max(np.abs(a.lens.top_probs[..., 0] - b.lens.top_probs[..., 0]).max() for a, b in pairs)), 5
            ),
        }
    try:
        found["edit_floor_s"] = round(
            median_ms(lambda: session.request(registered_floor(prompts)).result(600), 3)[0] / 1e3, 2
        )
    except Exception as error:  # noqa: BLE001 - a probe's failure is a result
        found["edit_floor_s"] = repr(error)[:300]
    start = time.perf_counter()
    for text in prompts[:singles]:
        session.prompt(text, window=1).result(REQUEST_TIMEOUT_S)
    single_s = (time.perf_counter() - start) / singles
    row = {
        "prompts": count,
        "tokens": [min(lengths), max(lengths)],
        "vllm_prefill_s": round(vllm_s, 2),
        "each_prompt_s": round(each_s, 2),
        "share_of_vllm": round(vllm_s / each_s, 2),
        "single_ms": round(single_s * 1e3, 1),
        "singles_over_each": round(single_s * count / each_s, 1),
        **found,
    }
    print(f"[bench] dataset: {row}", flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--tokens", default="512,4096")
    parser.add_argument(
        "--dtype", default="auto", help="engine dtype (auto: the checkpoint's own, float32 for the bench checkpoint)"
    )
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--checkpoint", default="qwen2_0.5b", help="qwen2_0.5b, llama3.1_8b or trained")
    parser.add_argument("--patch", type=int, default=0, help="also time a patching sweep over this many positions")
    parser.add_argument(
        "--chunks", default="", help="also time the sweep at these cells per request (e.g. 128,256), beside the default"
    )
    parser.add_argument("--generate", type=int, default=0, help="also time a generation of this many tokens")
    parser.add_argument(
        "--floors", default="", help="generation against its floors at these token counts (e.g. 32,128)"
    )
    parser.add_argument("--dataset", type=int, default=0, help="also time session.each over this many prompts")
    parser.add_argument("--singles", type=int, default=50, help="single requests timed for the dataset's comparison")
    parser.add_argument("--peak", action="store_true", help="also the GPU memory the shipped pattern adds")
    parser.add_argument("--guard", action="store_true", help="also the memory guard on the longest prompt")
    parser.add_argument(
        "--sides", default="", help="also the prompt request with the pattern pooled to these sides (e.g. 256,16)"
    )
    parser.add_argument(
        "--processes", action="store_true", help="the engine in its own processes on the CPU too (as on a GPU)"
    )
    parser.add_argument(
        "--no-parcels", action="store_true", help="large results cross pickled, not through shared memory"
    )
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    import torch

    from nnterp_widgets.engine import parcels
    from nnterp_widgets.session import Session

    if args.no_parcels:  # the baseline of engine.parcels: before the engine's processes start
        parcels.allow_parcels = lambda: None
        os.environ.pop(parcels.PARCELS_FOR, None)
    lengths = [int(n) for n in args.tokens.split(",") if n]
    started = time.monotonic()
    path = bench_checkpoint(args.checkpoint)
    built_s = time.monotonic() - started
    session = Session.open(
        path,
        progress=False,
        dtype=args.dtype,
        max_model_len=max(lengths) + 64,
        gpu_memory_utilization=0.5,
        **({"in_process": False} if args.processes else {}),
    ).wait()
    meta = {
        "device": getattr(session, "device", None) or ("cuda" if torch.cuda.is_available() else "cpu"),
        "dtype": getattr(session, "dtype", None) or args.dtype,
        "checkpoint": path,
        "name": args.checkpoint,
        "checkpoint_s": round(built_s, 1),
        "engine_start_s": round(session.start_seconds or 0, 1),
        "repeat": args.repeat,
        "parcels": not args.no_parcels,
    }
    rows = []
    try:
        tokenizer = session.tokenizer()
        for tokens in lengths:
            text = prompt_of(tokenizer, tokens)
            row = {"tokens": tokens}
            try:
                raw, raw_samples = median_ms(
                    lambda: session.request(_raw_forward(text), key="raw").result(REQUEST_TIMEOUT_S), args.repeat
                )
                results = []
                probe, probe_samples = median_ms(
                    lambda: results.append(session.prompt(text).result(REQUEST_TIMEOUT_S)), args.repeat
                )
                row.update(returned_mb=round(len(pickle.dumps(results[-1])) / 1e6, 2))
                if results[-1].attention is not None:
                    corner = max(0, tokens - session.pattern_side)
                    start = time.perf_counter()
                    session.attention(text, results[-1].attention.layer, window=(corner, corner)).result(
                        REQUEST_TIMEOUT_S
                    )
                    row.update(zoom_ms=round((time.perf_counter() - start) * 1e3, 1))
                    start = time.perf_counter()
                    session.attention_row(text, results[-1].attention.layer, tokens - 1).result(REQUEST_TIMEOUT_S)
                    row.update(row_ms=round((time.perf_counter() - start) * 1e3, 1))
                    if args.peak:
                        try:
                            row.update(peak_row(session, text, results[-1].attention.layer))
                        except Exception as error:  # noqa: BLE001 - the timings above stand
                            row.update(peak_error=repr(error)[:300])
                if args.sides:
                    row["sides"] = side_rows(session, text, [int(n) for n in args.sides.split(",") if n], args.repeat)
                row.update(
                    raw_ms=round(raw, 1),
                    prompt_ms=round(probe, 1),
                    ratio=round(probe / raw, 2),
                    raw_samples=[round(s, 1) for s in raw_samples],
                    prompt_samples=[round(s, 1) for s in probe_samples],
                )
            except Exception as error:  # noqa: BLE001 - one length's failure is a result
                row.update(error=repr(error)[:400], trace=traceback.format_exc()[-1500:])
            rows.append(row)
            write(out, meta, rows, args.repeat)
            print(f"[bench] {tokens} tokens: {row}", flush=True)
        if args.guard:
            meta["guard"] = guard_row(session, prompt_of(tokenizer, lengths[-1]))
        if args.generate:
            text = "The capital of France is"
            generated, samples = median_ms(
                lambda: session.generate(text, args.generate).result(REQUEST_TIMEOUT_S), args.repeat
            )
            meta["generate_ms"] = {"tokens": args.generate, "median": round(generated, 1)}
            print(f"[bench] generate {args.generate} tokens: {generated:.1f} ms", flush=True)
        if args.floors:
            meta["generation"] = generation_floors(session, [int(n) for n in args.floors.split(",") if n])
        if args.dataset:
            meta["dataset"] = dataset_rows(session, tokenizer, args.dataset, args.singles)
            write(out, meta, rows, args.repeat)
        if args.patch:
            clean, corrupted = pair_of(tokenizer, args.patch)
            if args.checkpoint == "trained":
                clean, corrupted = "The Eiffel Tower is in the city of", "The Colosseum is in the city of"
            answer = session.prompt(clean).result(REQUEST_TIMEOUT_S).lens.model_top_ids[0]
            foil = session.prompt(corrupted).result(REQUEST_TIMEOUT_S).lens.model_top_ids[0]
            if foil == answer:
                foil = int(answer) + 1  # random weights may answer both alike: any other token
            samples = []
            for _ in range(2 if args.repeat > 1 else 1):  # the first sweep of an engine, then a warm one
                start = time.perf_counter()
                sweep = session.patch(clean, corrupted, int(answer), int(foil)).result(600)
                samples.append(time.perf_counter() - start)
                layers, columns = sweep.patched.shape
                print(
                    f"[bench] patch {layers} x {columns}: {samples[-1]:.2f} s in {sweep.requests} requests", flush=True
                )
            took = samples[-1]
            meta["patch"] = {
                "cells": f"{layers} x {columns}",
                "requests": sweep.requests,
                "seconds": round(took, 2),
                "samples_s": [round(sample, 2) for sample in samples],
            }
            from common import vllm_prefill

            cells = sweep.patched.size
            floor, _ = median_ms(lambda: session.request(vllm_prefill([corrupted] * cells)).result(600), 1)
            meta["patch"]["vllm_prefill_s"] = round(floor / 1e3, 2)
            print(
                f"[bench] vLLM's own prefill of {cells} copies of the corrupted prompt: {floor / 1e3:.2f} s", flush=True
            )
            from nnterp_widgets.interventions.patching import patch

            for chunk in [int(c) for c in args.chunks.split(",") if c]:
                start = time.perf_counter()
                sweep = session.request(
                    lambda engine: patch(engine, clean, corrupted, int(answer), int(foil), chunk=chunk), key="patch"
                ).result(600)
                took = time.perf_counter() - start
                meta[f"patch_chunk_{chunk}"] = {"requests": sweep.requests, "seconds": round(took, 2)}
                print(
                    f"[bench] patch at {chunk} cells a request: {took:.2f} s in {sweep.requests} requests", flush=True
                )
        write(out, meta, rows, args.repeat)
    finally:
        session.close()
    lines = write(out, meta, rows, args.repeat)
    print("\n".join(lines), flush=True)
    return 0 if rows and all("error" not in row for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
