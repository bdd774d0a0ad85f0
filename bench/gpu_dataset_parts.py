"""Where a registered dataset question's time goes: its reads taken apart, on one engine.

    python bench/gpu_dataset_parts.py [--checkpoint llama3.1_8b] [--prompts 1000] [--repeat 2]

``session.each(prompts).prompt(window=1)`` runs one registered edit (`StandardizedVLLM.registered`)
over the prompts; each request's copy of it reads its own values. This times, over the same
prompts and in the same run: vLLM's own prefill (the floor), then registrations that read
more and more of what the prompt question reads, each through ``engine.registered`` as
`run_each` does (one registration, every prompt in one ``generate``):

- ``top5``: the model's top-5 at the last position (one read, one copy to the host);
- ``streams``: every layer's last-position stream, stacked, one copy to the host (a read a layer);
- ``raw_streams``: each layer's module output as vLLM returns it (nnsight's hand-off alone,
  without the standard value's sum);
- ``streams_kept``: ``streams`` left on the device until the request is collected (no
  synchronisation inside the forward);
- ``lens``: the lens question's own reads (`lens_reads`, one copy a returned array);
- ``prompt``: the prompt question's own reads (`prompt_reads`: the lens and the first
  layer's pooled pattern), as ``session.each(prompts).prompt(window=1)`` asks them;
- ``lens_one_copy``: the lens at the last position of every layer (the reads of ``streams``
  and one vocabulary projection), its top-k ids and probabilities in one copy to the host;
- ``each_prompt``: the whole call (its prompts streamed through one registration);
- ``step_streams`` and ``step_lens``: ``streams`` and ``lens_one_copy`` read once a step
  instead of once a request (`step_reads`: a hook a layer gathers every request's last row;
  each request's block makes two hand-offs and takes its share), with how far their values
  are from the per-request parts'.

The differences say what a read a layer, a vocabulary projection, a copy to the host and the
pattern cost a prompt. Prints each as it lands and writes ``OUT/dataset_parts.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import step_reads  # noqa: E402
from common import vllm_prefill  # noqa: E402
from common import bench_checkpoint, dataset_prompts  # noqa: E402
from gpu_prompt import median_ms  # noqa: E402


def top5_reads(model) -> dict:
    return {"top": model.logits[0, -1].topk(5).indices.cpu().numpy()}


def streams_reads(model) -> dict:
    import torch

    rows = [model.layers[index].layer_output[0, -1] for index in range(model.num_layers)]
    return {"streams": torch.stack(rows).float().cpu().numpy()}


def streams_kept_reads(model) -> dict:
    """`streams` left on the engine's device until the request is collected: no copy to
    the CPU (a synchronisation on a GPU) inside the forward."""
    import torch

    rows = [model.layers[index].layer_output[0, -1] for index in range(model.num_layers)]
    return {"streams": torch.stack(rows).float()}


def raw_streams_reads(model) -> dict:
    """Each layer's module output as vLLM returns it (its first part's last row): nnsight's
    hand-off alone, without the standard value's sum and copy."""
    import torch

    rows = [model.layers[index].output[0][-1] for index in range(model.num_layers)]
    return {"streams": torch.stack(rows).float().cpu().numpy()}


def lens_one_copy_reads(model, k: int) -> dict:
    import torch

    rows = [model.layers[index].layer_output[0, -1] for index in range(model.num_layers)]
    probs = model.project_on_vocab(torch.stack(rows)).float().softmax(-1)
    top = probs.topk(k)
    return {"lens": torch.cat([top.values, top.indices.float()], -1).cpu().numpy()}


def timed_registration(session, prompt_ids: list, reads, args: tuple, repeat: int, per_step: bool = False):
    """Seconds for one registration of ``reads(model, *args)`` over every prompt, and the
    last run's answers (``per_step``: `step_reads`' hooks installed around it)."""
    answers: list = []

    def once():
        def run(engine):
            rpc = engine.vllm_entrypoint.collective_rpc
            if per_step:
                rpc(step_reads.install)
            try:
                with engine.registered(reads, args) as ask:
                    found = ask(prompt_ids)
            finally:
                if per_step:
                    rpc(step_reads.uninstall)
            assert len(found) == len(prompt_ids)
            return found

        answers[:] = session.request(run, key="parts").result(900)

    return median_ms(once, repeat)[0] / 1e3, answers


def largest_gap(answers: list, reference: list, key: str, columns: int | None = None) -> float:
    """The largest absolute difference between two parts' arrays under ``key`` (their
    first ``columns`` columns: a lens's probabilities), over every prompt."""
    import numpy as np

    def part(found):
        return np.asarray(found[key], float)[..., :columns]

    return max(float(np.abs(part(a) - part(b)).max()) for a, b in zip(answers, reference, strict=True))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument(
        "--checkpoint", default="llama3.1_8b", help="llama3.1_8b, qwen2_0.5b, llama_thin_32, trained or tiny"
    )
    parser.add_argument("--prompts", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--only", default="", help="these parts alone (e.g. streams,prompt)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

    from nnterp_widgets.requests import LENS_K, lens_reads, prompt_plan, prompt_reads, prompt_shared
    from nnterp_widgets.session import Session

    if args.checkpoint == "tiny":
        from nnterp_widgets.checkpoints import checkpoint

        path = str(checkpoint())
    else:
        path = bench_checkpoint(args.checkpoint)
    session = Session.open(
        path,
        progress=False,
        dtype=args.dtype,
        max_model_len=256,
        gpu_memory_utilization=0.5,
    ).wait()
    found: dict = {"checkpoint": args.checkpoint, "prompts": args.prompts, "repeat": args.repeat}

    def record(name: str, seconds: float) -> None:
        found[name + "_s"] = round(seconds, 3)
        print(f"[parts] {name}: {seconds:.3f} s", flush=True)
        (out / "dataset_parts.json").write_text(json.dumps(found, indent=1))

    try:
        prompts = dataset_prompts(args.prompts)
        plans = session.request(lambda engine: [prompt_plan(engine, text, window=1) for text in prompts]).result(600)
        prompt_ids = [ids for ids, _, _ in plans]
        shared = {prompt_shared(ids, reads_args) for ids, reads_args, _ in plans}
        assert len(shared) == 1, f"the prompts do not share one registration: {len(shared)} argument sets"
        prompt_args = shared.pop()
        record(
            "vllm_prefill", median_ms(lambda: session.request(vllm_prefill(prompts)).result(600), args.repeat)[0] / 1e3
        )
        parts = (
            ("top5", top5_reads, ()),
            ("streams", streams_reads, ()),
            ("raw_streams", raw_streams_reads, ()),
            ("streams_kept", streams_kept_reads, ()),
            ("lens", lens_reads, (-1, None, LENS_K, ())),
            ("prompt", prompt_reads, prompt_args),
            ("lens_one_copy", lens_one_copy_reads, (LENS_K,)),
            ("step_streams", step_reads.step_streams_reads, ()),
            ("step_lens", step_reads.step_lens_reads, (LENS_K,)),
        )
        kept: dict = {}
        against = {"step_streams": ("streams", "streams", None), "step_lens": ("lens_one_copy", "lens", LENS_K)}
        for name, reads, reads_args in parts:
            if args.only and name not in args.only.split(","):
                continue
            try:
                seconds, kept[name] = timed_registration(
                    session, prompt_ids, reads, reads_args, args.repeat, per_step=name.startswith("step_")
                )
                record(name, seconds)
                reference, key, columns = against.get(name, (None, None, None))
                if reference in kept:
                    found[name + "_largest_gap"] = largest_gap(kept[name], kept[reference], key, columns)
                    print(f"[parts] {name}: largest gap to {reference}: {found[name + '_largest_gap']:.3g}", flush=True)
            except Exception as error:  # noqa: BLE001 - one part's failure is a result
                found[name + "_error"] = repr(error)[:400]
                print(f"[parts] {name} failed: {error!r}", flush=True)
        if not args.only or "each_prompt" in args.only.split(","):
            started = time.perf_counter()
            session.each(prompts).prompt(window=1).result(900)
            record("each_prompt", time.perf_counter() - started)
    finally:
        session.close()
    print(json.dumps(found, indent=1), flush=True)


if __name__ == "__main__":
    main()
