"""Every family of docs/families.md started on a GPU, its served values held to transformers.

    python tools/gpu_families.py --out OUT [--device cuda] [--families a,b] [--budget SECONDS] [--jobs N]

One engine per family on its tiny checkpoint (`checkpoints.checkpoint`), ``--jobs`` of
them at once in their own processes (each takes a tenth of the GPU's memory), one
trace of every served value (tests/traces.py), compared with transformers on the same
device (tests/reference.py: float32, eager attention, the family's own reference route).
Writes ``OUT/families.json`` and ``OUT/families.md`` after every family, so a run cut
short by ``--budget`` or a timeout still leaves what it measured.

dtype: float32 (exact float32: `engine.platform.EXACT_FLOAT32`), except DeepSeek, whose
latent-attention backends reject float32 on a GPU; it runs in bfloat16 and is held to
a bfloat16 reference (transformers in the same dtype) with `BF16_SCALE` below, its
distance from the float32 reference reported beside (the row's ``bf16_reference``
decides its status). Families written for vLLM's Transformers
backend ask for it by name (``model_impl="transformers"``, see `StandardizedVLLM`),
so CUDA vLLM 0.26's native olmo3 / phi / gpt_neox are not what is checked; where the
installed vLLM's backend cannot serve them the engine refuses them with its reason
(`transformers_backend.KERNEL_OUTSIDE_TREE`), reported as "not run".
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"
PROMPT = "The Eiffel Tower is in"
#: Families checked first: those whose engine or kernels differ on a GPU.
FIRST = ("qwen2", "gpt2", "deepseek_v2", "gpt_neox", "phi", "olmo3", "mpt", "gemma2", "falcon", "bloom", "mixtral")
#: Families that cannot serve float32 on a GPU, and why.
BF16_ONLY = {
    "deepseek_v2": "vLLM's MLA backends reject float32 on the GPU",
    "deepseek_v3": "vLLM's MLA backends reject float32 on the GPU",
}
#: float32 tolerance: the CPU suite's (tests/test_families.py TOL and LOOSER).
TOL = dict(atol=1e-4, rtol=1e-4)
#: bfloat16 engine vs float32 reference. bfloat16 keeps 8 significant bits (a value's
#: rounding error is up to 2**-9 = 0.2% of it); the engine rounds every weight and every
#: op's output, the reference none, so after a couple of blocks values differ by a few
#: per cent of their scale. Held: each value within 5% of its largest magnitude, and the
#: engine's top-1 token the reference's (or tied with it within that tolerance).
BF16_SCALE = 5e-2
#: vLLM's start-up error when another process frees GPU memory during its memory profile.
MEMORY_RACE = "memory profiling"


def _looser() -> dict:
    """The families' own float32 tolerances (`Family.tolerance`, said with their reason
    in each family's file), where one is looser than `TOL`."""
    from nnterp_widgets.families.vllm import families

    return {name: family.tolerance for name, family in families().items() if family.tolerance}


def _compare(values: dict, reference: dict, attention: dict, family: str, bf16: bool, looser: dict) -> dict:
    import torch

    tol = looser.get(family, TOL)
    checks, failed, worst = 0, [], {}
    if values["input_ids"].tolist() != reference["input_ids"].tolist():
        failed.append("input_ids")
    pairs = [(key, values[key], want) for key, want in reference.items() if key not in ("input_ids",) and key in values]
    pairs += [(key, values[key], want) for key, want in attention.items() if key in values]
    for key, got, want in pairs:
        checks += 1
        name = key if isinstance(key, str) else f"{key[0]}[{key[1]}]"
        got, want = got.detach().float(), want.detach().float().to(got.device)
        if got.shape != want.shape:
            failed.append(f"{name}: shape {list(got.shape)} vs {list(want.shape)}")
            continue
        diff = (got - want).abs().max().item() if got.numel() else 0.0
        scale = want.abs().max().item() if want.numel() else 0.0
        worst[name] = {"max_abs": diff, "rel_to_scale": diff / scale if scale else diff}
        if bf16:
            ok = diff <= BF16_SCALE * max(scale, 1e-6)
        else:
            ok = torch.allclose(got, want, **tol)
        if not ok:
            failed.append(name)
    if bf16:
        # The engine's top-1 token is the reference's, or one the reference ranks within
        # the tolerance of its top (two near-equal logits may swap in bfloat16).
        checks += 1
        want = reference["logits"].float().flatten()
        top = int(values["logits"].float().flatten().argmax())
        if want[top] < want.max() - BF16_SCALE * want.abs().max():
            failed.append("logits top-1")
    top = sorted(worst.items(), key=lambda item: -item[1]["rel_to_scale"])[:3]
    return {"checks": checks, "failed": failed, "worst": dict(top)}


def run_family(family: str, device: str) -> dict:
    import torch

    from nnterp_widgets import StandardizedVLLM
    from nnterp_widgets.checkpoints import checkpoint
    from nnterp_widgets.families.vllm import family_for
    from reference import reference_attention, reference_values
    from traces import trace_values

    spec = family_for(family)
    dtype = "bfloat16" if device == "cuda" and family in BF16_ONLY else "float32"
    row = {"family": family, "device": device, "dtype": dtype, "backend": spec.backend}
    path = str(checkpoint(family))
    started = time.monotonic()
    try:
        with _gpu_memory_lock():
            engine = StandardizedVLLM(path, dtype=dtype, gpu_memory_utilization=0.1, max_model_len=512)
    except Exception as error:  # noqa: BLE001 - reported per family
        from nnterp_widgets.components.vllm.transformers_backend import KERNEL_OUTSIDE_TREE

        declared = (spec.engine_error is not None and spec.engine_error in str(error)) or (
            KERNEL_OUTSIDE_TREE in str(error)
        )
        row.update(status="not run" if declared else "error", error=str(error).splitlines()[0][:400])
        return row
    row["start_s"] = round(time.monotonic() - started, 1)
    try:
        row["vllm_class"] = _served_class(engine)
        values = trace_values(engine, PROMPT)
        reference = reference_values(path, family, PROMPT)
        plan = values["plan"]
        interior = any(block["interior"] for block in plan.values())
        attention = reference_attention(path, family, PROMPT) if interior else {}
        row.update(_compare(values, reference, attention, family, dtype == "bfloat16", _looser()))
        if dtype == "bfloat16":
            # The same dtype on both sides: what the engine's kernels change, apart from rounding.
            same = reference_values(path, family, PROMPT, dtype=torch.bfloat16)
            row["bf16_reference"] = _compare(values, same, {}, family, True, _looser())
            row["status"] = "pass" if not row["bf16_reference"]["failed"] else "fail"
        else:
            row["status"] = "pass" if not row["failed"] else "fail"
    except Exception as error:  # noqa: BLE001
        row.update(status="error", error=repr(error)[:400], trace=traceback.format_exc()[-1500:])
    finally:
        with _gpu_memory_lock():
            pids = engine.engine_pids
            engine.close()
            del engine
            _wait_gone(pids)
            if device == "cuda":
                torch.cuda.empty_cache()
    row["total_s"] = round(time.monotonic() - started, 1)
    return row


@contextlib.contextmanager
def _gpu_memory_lock():
    """One engine at a time starts or stops: vLLM's start-up memory profile fails when
    another process frees GPU memory under it (run 2 lost families to it, `MEMORY_RACE`)."""
    with open(os.environ.get("GPU_FAMILIES_LOCK", "/tmp/gpu_families.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _wait_gone(pids: list[int], limit: float = 30.0) -> None:
    """Wait until the closed engine's processes have exited (and freed the GPU), so the
    next engine's memory profiling does not see memory released under it."""
    deadline = time.monotonic() + limit
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                state = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                break
            if "State:\tZ" in state:
                break
            time.sleep(0.2)


def _served_class(engine) -> str:
    from nnterp_widgets.engine import module_of

    try:
        return type(module_of(engine)).__name__
    except Exception:  # noqa: BLE001
        return "?"


def write(out: Path, rows: list[dict], meta: dict) -> None:
    (out / "families.json").write_text(json.dumps({"meta": meta, "families": rows}, indent=1))
    lines = [
        f"# Families on {meta['device']} ({meta.get('gpu', '')})",
        "",
        f"vllm {meta.get('vllm')}, torch {meta.get('torch')}, transformers {meta.get('transformers')}; "
        f"prompt {PROMPT!r}; float32 held to {TOL}, bfloat16 to {BF16_SCALE:.0%} of each value's scale "
        "and the same top-1 token.",
        "",
        "| family | dtype | backend | served class | status | checks | failed | worst (value: max abs, rel. to scale) | start s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        worst = "; ".join(
            f"{name}: {w['max_abs']:.1e}, {w['rel_to_scale']:.1e}" for name, w in row.get("worst", {}).items()
        )
        failed = ", ".join(row.get("failed", [])) or row.get("error", "")
        if "bf16_reference" in row:
            same = row["bf16_reference"]
            worst_same = "; ".join(
                f"{name}: {w['max_abs']:.1e}, {w['rel_to_scale']:.1e}" for name, w in same["worst"].items()
            )
            failed = (
                f"vs bfloat16 reference: {', '.join(same['failed']) or 'none'} (worst {worst_same}); "
                f"vs float32: {failed or 'none'}"
            )
        lines.append(
            f"| {row['family']} | {row['dtype']} | {row['backend']} | {row.get('vllm_class', '')} | "
            f"{row['status']} | {row.get('checks', '')} | {failed.replace('|', '/')} | {worst} | {row.get('start_s', '')} |"
        )
    counts = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    lines += [
        "",
        "Totals: "
        + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        + (f"; not reached (budget): {', '.join(meta['not_reached'])}" if meta.get("not_reached") else ""),
    ]
    (out / "families.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for families.json/.md")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--families", default="", help="comma-separated model types (default: all)")
    parser.add_argument("--budget", type=float, default=0, help="stop starting families after this many seconds")
    parser.add_argument("--jobs", type=int, default=1, help="families checked at once, each in its own process")
    parser.add_argument("--one", default="", help=argparse.SUPPRESS)  # a child: one family, its row to OUT
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(TESTS))
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

    import devices
    import torch
    import transformers

    from nnterp_widgets.families.vllm import known

    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"SKIP: {devices.NO_CUDA}")
        return 0
    devices.select(args.device)
    chosen = [name for name in args.families.split(",") if name] or list(known())
    unknown = sorted(set(chosen) - set(known()))
    if unknown:
        parser.error(f"unknown families {unknown}; known: {', '.join(known())}")
    order = [name for name in FIRST if name in chosen] + [name for name in chosen if name not in FIRST]
    try:
        import vllm

        version = vllm.__version__
    except Exception:  # noqa: BLE001
        version = "?"
    meta = {
        "device": args.device,
        "vllm": version,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu",
    }
    began, rows = time.monotonic(), []
    if args.one:
        row = run_family(args.one, args.device)
        (out / f"{args.one}.row.json").write_text(json.dumps(row))
        return 0
    pending, running, retried = list(order), {}, set()

    def stop(signum, frame):  # a time limit: the engines go with this process
        for process, _ in running.values():
            process.kill()
        write(out, rows, meta)
        sys.exit(124)

    signal.signal(signal.SIGTERM, stop)
    while pending or running:
        while pending and len(running) < max(1, args.jobs):
            if args.budget and time.monotonic() - began > args.budget:
                meta["not_reached"] = list(pending)
                pending = []
                break
            family = pending.pop(0)
            (out / f"{family}.row.json").unlink(missing_ok=True)
            print(f"[families] {family} ...", flush=True)
            log = open(out / f"{family}.log", "w")
            running[family] = (
                subprocess.Popen(
                    [sys.executable, __file__, "--out", str(out), "--device", args.device, "--one", family],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                ),
                log,
            )
        for family, (process, log) in list(running.items()):
            if process.poll() is None:
                continue
            log.close()
            del running[family]
            result = out / f"{family}.row.json"
            if result.exists():
                row = json.loads(result.read_text())
            else:
                tail = (out / f"{family}.log").read_text()[-400:]
                row = {
                    "family": family,
                    "device": args.device,
                    "status": "error",
                    "error": f"exit {process.returncode}: {tail}",
                }
            raced = MEMORY_RACE in row.get("error", "") or MEMORY_RACE in (out / f"{family}.log").read_text()
            if row["status"] == "error" and raced and family not in retried:
                # vLLM's start-up memory profile saw another engine free memory: try again.
                retried.add(family)
                pending.append(family)
                continue
            rows.append(row)
            rows.sort(key=lambda done: order.index(done["family"]))
            print(
                f"[families] {family}: {row['status']} ({row.get('checks', 0)} checks, "
                f"failed {row.get('failed') or row.get('error', '-')}) in {row.get('total_s', '?')} s",
                flush=True,
            )
            write(out, rows, meta)
        time.sleep(0.5)
    write(out, rows, meta)
    statuses = [row["status"] for row in rows]
    print(
        f"[families] pass {statuses.count('pass')}, fail {statuses.count('fail')}, "
        f"error {statuses.count('error')}, not run {statuses.count('not run')}, "
        f"not reached {len(meta.get('not_reached', []))}",
        flush=True,
    )
    return 0 if not {"fail", "error"} & set(statuses) else 1


if __name__ == "__main__":
    sys.exit(main())
