"""Questions over a dataset: `session.each` on the trained model (CPU engine).

    python bench/dataset.py

One session on `checkpoints.trained()`; 256 prompts of 12-20 tokens. Against floors on
the same engine, in the same run:

* ``each(prompts).prompt(window=1)`` against one batched raw forward of the same prompts
  (one trace, an invoke each) plus the lens arithmetic of their last positions (every
  layer's last stream, the final norm and the vocabulary projection, softmax, top-5),
  and against 256 single ``session.prompt`` calls;
* ``each(prompts).attribute(answers)`` against the batched raw forward;
* both with every prompt an invoke (``REGISTER_AT`` out of reach) against the default,
  where prompts sharing their reads' arguments go through one registration, and against
  vLLM's own prefill of the prompts (``LLM.generate``, one token, no nnsight);
* the kernel's RSS holding 100 and then 1,000 prompts' answers of ``prompt(window=1)``.

Targets (issue 38): prompt within 1.3x its floor and at least 4x faster than the single
calls; attribute within 1.5x the batched forward; RSS at 1,000 within 1.2x of 100's.
"""

from __future__ import annotations

import gc

import torch

from common import ENGINE_KWARGS, median_seconds, report, rss_bytes, vllm_prefill

SUBJECTS = ["France", "Italy", "Spain", "Germany", "Japan", "Egypt", "Canada", "Peru", "Kenya", "Norway", "India"]
TEMPLATES = [
    "The capital of {} is the city of",
    "Everyone knows that the capital city of {} is called",
    "In a geography lesson, the teacher said the capital of {} is",
    "Question: what is the capital of {}? Answer:",
]


def dataset(tokenizer, count: int) -> list[str]:
    """``count`` prompts of 12-20 tokens."""
    prompts, index = [], 0
    while len(prompts) < count:
        text = TEMPLATES[index % len(TEMPLATES)].format(SUBJECTS[index % len(SUBJECTS)])
        text = ("Note %d. " % index) + text
        if 12 <= len(tokenizer(text)["input_ids"]) <= 20:
            prompts.append(text)
        index += 1
    return prompts


def batched_forward(prompts: list[str], lens: bool):
    def run(model):
        with model.trace(temperature=0.0, max_tokens=1) as tracer:
            got = list().save()
            for text in prompts:
                with tracer.invoke(text):
                    if lens:
                        streams = torch.cat([layer.layer_output[0, -1:] for layer in model.layers])
                        top = torch.softmax(model.project_on_vocab(streams).float(), -1).topk(5)
                        got.append((top.values.cpu(), top.indices.cpu()))
                    got.append(model.logits[0, -1].topk(5).indices.cpu())
        return got

    return run


def main() -> str:
    from nnterp_widgets.checkpoints import trained
    from nnterp_widgets.requests import batches
    from nnterp_widgets.session import Session

    session = Session.open(trained(), progress=False, max_model_len=256, **ENGINE_KWARGS).wait()
    tokenizer = session.tokenizer()
    prompts = dataset(tokenizer, 256)
    rows = []

    def timed(fn, repeat=3):
        return median_seconds(fn, repeat=repeat, warmup=1)

    try:
        forward = timed(lambda: session.request(batched_forward(prompts, lens=False)).result())
        floor = timed(lambda: session.request(batched_forward(prompts, lens=True)).result())
        each = timed(lambda: session.each(prompts).prompt(window=1).result())
        singles = timed(lambda: [session.prompt(text, window=1).result() for text in prompts], repeat=1)
        answers = [" Paris"] * len(prompts)
        attribute = timed(lambda: session.each(prompts).attribute(answers).result())
        vllm = timed(lambda: session.request(vllm_prefill(prompts)).result())
        shared_at, batches.REGISTER_AT = batches.REGISTER_AT, 10**9
        try:
            each_invokes = timed(lambda: session.each(prompts).prompt(window=1).result())
            attribute_invokes = timed(lambda: session.each(prompts).attribute(answers).result())
        finally:
            batches.REGISTER_AT = shared_at
        rows += [
            ("256 prompts: batched raw forward", f"{forward:.2f} s"),
            ("256 prompts: batched forward + last-position lens", f"{floor:.2f} s"),
            ("each(...).prompt(window=1)", f"{each:.2f} s ({each / floor:.2f}x its floor)"),
            ("256 single session.prompt calls", f"{singles:.2f} s ({singles / each:.1f}x each(...).prompt)"),
            ("each(...).attribute(answers)", f"{attribute:.2f} s ({attribute / forward:.2f}x the batched forward)"),
            ("256 prompts: vLLM's own prefill (LLM.generate, 1 token)", f"{vllm:.2f} s"),
            (
                "each(...).prompt, every prompt an invoke",
                f"{each_invokes:.2f} s (registered: {each_invokes / each:.2f}x faster; "
                f"vLLM's prefill is {vllm / each:.0%} of registered, {vllm / each_invokes:.0%} of invokes)",
            ),
            (
                "each(...).attribute, every prompt an invoke",
                f"{attribute_invokes:.2f} s (registered: {attribute_invokes / attribute:.2f}x faster)",
            ),
        ]
        held = {}
        for count in (100, 1000):
            gc.collect()
            held[count] = session.each(dataset(tokenizer, count)).prompt(window=1).result()
            gc.collect()
            rows.append((f"RSS holding {count} prompts' answers", f"{rss_bytes() / 2**20:,.0f} MiB"))
            if count == 100:
                small = rss_bytes()
        rows.append(("RSS at 1,000 / RSS at 100", f"{rss_bytes() / small:.3f}"))
    finally:
        session.close()
    return report("Questions over 256 prompts (session.each, trained model, CPU)", rows)


if __name__ == "__main__":
    main()
