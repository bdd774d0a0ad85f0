"""Generation at the engine's speed (issue 35): `session.generate` and `session.steer`
against floors measured in the same run, on the trained model (SmolLM2-135M, CPU engine).

Floors, all on the session's own engine and the same prompt, greedy, exactly N tokens
(``min_tokens=N``):

* vLLM's own ``LLM.generate`` of the same tokens (no nnsight): the outer floor;
* the raw nnsight trace generating them (saving the sampled tokens only);
* that trace plus the lens's one matrix product a step (every layer's last stream,
  stacked, through the final norm and the unembedding, top-1): the floor the target is
  held to (within 1.3x); steering's floor is two of them.

    python bench/generation.py [--tokens 32,128] [--repeat 3]
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


def vllm_generate(tokens: int):
    def run(model):
        from vllm import SamplingParams

        params = SamplingParams(max_tokens=tokens, min_tokens=tokens, temperature=0.0)
        return model.vllm_entrypoint.generate([PROMPT], params, use_tqdm=False)

    return run


def main(argv: list[str] | tuple = ()) -> str:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", default="32,128")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(list(argv))
    from nnterp_widgets.session import Session

    session = Session.open(progress=False, max_model_len=1024).wait()
    rows = []
    for tokens in [int(n) for n in args.tokens.split(",")]:
        outer = median_seconds(lambda: session.request(vllm_generate(tokens)).result(), args.repeat, warmup=1)
        raw = median_seconds(lambda: session.request(raw_trace(tokens, lens=False)).result(), args.repeat, warmup=1)
        floor = median_seconds(lambda: session.request(raw_trace(tokens, lens=True)).result(), args.repeat, warmup=1)
        ours = median_seconds(
            lambda: session.generate(PROMPT, tokens, min_tokens=tokens).result(), args.repeat, warmup=1
        )
        vector = session.steering_vector("I love it", "I hate it", 8).result()
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
    return report("Generation against its floors (trained model, CPU engine)", rows)


if __name__ == "__main__":
    main(sys.argv[1:])
