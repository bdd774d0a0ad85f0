"""Generation at the engine's speed (issue 35): `session.generate` and `session.steer`
against floors measured in the same run, on the trained model (SmolLM2-135M, CPU engine).

Floors, all on the session's own engine and the same prompt, greedy, exactly N tokens
(``min_tokens=N``):

* vLLM's own ``LLM.generate`` of the same tokens (no nnsight): the outer floor;
* the raw nnsight trace generating them (saving the sampled tokens only);
* that trace plus the lens's one matrix product a step (every layer's last stream,
  stacked, through the final norm and the unembedding, top-1): the floor the target is
  held to (within 1.3x); steering's floor is two of them.

    python bench/generation.py [--tokens 32,128] [--repeat 3] [--each 32] [--checkpoint llama3.1_8b]

``--each N``: N prompts at once instead (``session.each(prompts).generate`` and ``.steer``
of half of them, 16 tokens), against vLLM's own ``generate`` of the same prompts and the
raw trace of them with the lens a step (one trace, an invoke a prompt; the steps selected
with `engine.steps`, as the session does, so that no invoke ships the module tree).
"""

from __future__ import annotations

import argparse
import sys

import torch

from common import median_seconds, report

PROMPT = "The Eiffel Tower is in the city of Paris. It was built"


def raw_trace(tokens: int, lens: bool):
    def run(model):
        with model.trace(PROMPT, max_tokens=tokens, min_tokens=tokens, temperature=0.0) as tracer:
            written = list().save()
            for _ in tracer.iter[:tokens]:
                if lens:
                    streams = torch.cat([layer.layer_output[0, -1:] for layer in model.layers])
                    written.append(model.project_on_vocab(streams).argmax(-1).cpu())
                written.append(model.samples.reshape(-1).cpu())
        return written

    return run


def vllm_generate(tokens: int, prompts: list[str] | None = None):
    def run(model):
        from vllm import SamplingParams

        params = SamplingParams(max_tokens=tokens, min_tokens=tokens, temperature=0.0)
        return model.vllm_entrypoint.generate(prompts or [PROMPT], params, use_tqdm=False)

    return run


def raw_each(prompts: list[str], tokens: int):
    def run(model):
        from nnterp_widgets.engine import steps

        with model.trace(max_tokens=tokens, min_tokens=tokens, temperature=0.0) as tracer:
            written = list().save()
            for prompt in prompts:
                with tracer.invoke(prompt):
                    for _ in steps(tokens):
                        streams = torch.cat([layer.layer_output[0, -1:] for layer in model.layers])
                        written.append(model.project_on_vocab(streams).argmax(-1).cpu())
                        written.append(model.samples.reshape(-1).cpu())
        return written

    return run


def batch_rows(session, count: int, repeat: int) -> list[tuple[str, str]]:
    """``each(prompts).generate`` and ``.steer`` against their floors, 16 tokens."""
    from common import dataset_prompts

    tokens, prompts = 16, dataset_prompts(count)
    outer = median_seconds(lambda: session.request(vllm_generate(tokens, prompts)).result(), repeat, warmup=1)
    floor = median_seconds(lambda: session.request(raw_each(prompts, tokens)).result(), repeat, warmup=1)
    ours = median_seconds(lambda: session.each(prompts).generate(tokens, min_tokens=tokens).result(), repeat, warmup=1)
    half = prompts[: count // 2]
    vector = session.steering_vector("I love it", "I hate it", 8).result()
    steer = median_seconds(
        lambda: session.each(half).steer(vector, 8, 2.0, tokens, min_tokens=tokens).result(), repeat, warmup=1
    )
    name = f"{count} prompts x {tokens} tokens"
    return [
        (f"{name}: vLLM's own generate", f"{outer:.2f} s"),
        (f"{name}: raw trace + one lens product a step", f"{floor:.2f} s"),
        (f"{name}: each(prompts).generate", f"{ours:.2f} s"),
        (f"{name}: generate / floor", f"{ours / floor:.2f}"),
        (f"{count // 2} prompts: each(prompts).steer (two runs a prompt)", f"{steer:.2f} s"),
        (f"{count // 2} prompts: steer / floor (the same runs)", f"{steer / floor:.2f}"),
    ]


def main(argv: list[str] | tuple = ()) -> str:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", default="32,128")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--each", type=int, default=0, help="prompts at once (0: one prompt at a time)")
    parser.add_argument(
        "--checkpoint", default="", help="common.bench_checkpoint's name (llama3.1_8b; default: the trained model)"
    )
    args = parser.parse_args(list(argv))
    from nnterp_widgets.session import Session

    if args.checkpoint:
        from common import bench_checkpoint

        path = bench_checkpoint(args.checkpoint)
        session = Session.open(path, progress=False, max_model_len=1024, gpu_memory_utilization=0.5).wait()
    else:
        session = Session.open(progress=False, max_model_len=1024).wait()
    shown = args.checkpoint or "trained model"
    if args.each:
        rows = batch_rows(session, args.each, args.repeat)
        session.close()
        return report(f"Generation over many prompts against its floors ({shown}, {session.device} engine)", rows)
    rows = []
    vector = session.steering_vector("I love it", "I hate it", 8).result()
    for tokens in [int(n) for n in args.tokens.split(",")]:
        outer = median_seconds(lambda: session.request(vllm_generate(tokens)).result(), args.repeat, warmup=1)
        raw = median_seconds(lambda: session.request(raw_trace(tokens, lens=False)).result(), args.repeat, warmup=1)
        floor = median_seconds(lambda: session.request(raw_trace(tokens, lens=True)).result(), args.repeat, warmup=1)
        ours = median_seconds(
            lambda: session.generate(PROMPT, tokens, min_tokens=tokens).result(), args.repeat, warmup=1
        )
        steer = median_seconds(
            lambda: session.steer(PROMPT, vector, 8, 2.0, tokens, min_tokens=tokens).result(), args.repeat, warmup=1
        )
        rows += [
            (f"{tokens} tokens: vLLM's own generate", f"{outer * 1e3:.0f} ms ({tokens / outer:.0f} tokens/s)"),
            (f"{tokens} tokens: raw nnsight trace", f"{raw * 1e3:.0f} ms"),
            (f"{tokens} tokens: raw trace + one lens product a step", f"{floor * 1e3:.0f} ms"),
            (f"{tokens} tokens: session.generate", f"{ours * 1e3:.0f} ms"),
            (f"{tokens} tokens: generate / floor (target <= 1.3)", f"{ours / floor:.2f}"),
            (f"{tokens} tokens: session.steer", f"{steer * 1e3:.0f} ms"),
            (f"{tokens} tokens: steer / two floors (target <= 1.3)", f"{steer / (2 * floor):.2f}"),
        ]
    session.close()
    return report(f"Generation against its floors ({shown}, {session.device} engine)", rows)


if __name__ == "__main__":
    main(sys.argv[1:])
