"""Long work answers early (issue 35), on the trained model (SmolLM2-135M, CPU engine),
each against a floor measured in the same run:

* occlusion of a ~312-token paragraph: the coarse row (every block occluded: the first
  partial answer with no gap) against one forward of the prompt (target: within 10x),
  and the whole refined answer against today's token-by-token occlusion (target: within
  0.35x);
* a lens window move on the prompt shown (the streams kept in the worker: no forward)
  against the lens's own arithmetic for the window, run alone in the worker on the same
  streams (target: within 1.2x), at ~312 and ~2,048 tokens.

    python bench/long_work.py [--skip-occlusion] [--skip-lens]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from common import median_seconds, report

SENTENCES = [
    "The Eiffel Tower is in Paris, the capital of France.",
    "It was built for the world's fair of 1889 and was the tallest structure of its time.",
    "The Colosseum is in Rome, where gladiators once fought before crowds of thousands.",
    "Big Ben stands beside the Houses of Parliament in London.",
    "The Statue of Liberty was a gift from France to the United States.",
    "Visitors climb the tower's stairs or take the lift to the top, where the city spreads below.",
]


def paragraph(tokenizer, tokens: int) -> str:
    text, index = "", 0
    while len(tokenizer(text)["input_ids"]) < tokens:
        text += (" " if text else "") + SENTENCES[index % len(SENTENCES)]
        index += 1
    return text + " The Eiffel Tower is in the city of"


def forward(prompt: str):
    def run(model):
        with model.trace(prompt, temperature=0.0, max_tokens=1):
            logits = model.logits.cpu().save()
        return logits

    return run


def arithmetic(key: str, start: int, stop: int, repeat: int):
    """The lens's own arithmetic for a window, alone in the worker, on the kept streams."""

    def run(model):
        from nnterp_widgets.requests import kept

        def once(_):
            began = time.perf_counter()
            kept.kept_rows(key, start, stop)
            return time.perf_counter() - began

        samples = [model.vllm_entrypoint.apply_model(once)[0] for _ in range(repeat)]
        return sorted(samples)[len(samples) // 2]

    return run


def main(argv: list[str] | tuple = ()) -> str:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-occlusion", action="store_true")
    parser.add_argument("--skip-lens", action="store_true")
    args = parser.parse_args(list(argv))
    from nnterp_widgets.session import Session

    session = Session.open(progress=False, max_model_len=4096).wait()
    tokenizer = session.tokenizer()
    rows = []
    if not args.skip_occlusion:
        text = paragraph(tokenizer, 300)
        count = len(tokenizer(text)["input_ids"])
        one = median_seconds(lambda: session.request(forward(text)).result(), 3, warmup=1)
        session.occlude(text, " Paris").result()  # warm-up: the first run compiles the invokes
        began = time.perf_counter()
        job = session.occlude(text, " Paris")
        coarse_at = []

        def watch(running) -> None:
            partial = running.partial()
            if not coarse_at and partial is not None and not np.isnan(partial.logits).any():
                coarse_at.append(time.perf_counter() - began)

        job.on_progress(watch)
        refined = job.result()
        whole = time.perf_counter() - began
        began = time.perf_counter()
        full = session.occlude(text, " Paris", resolution="token").result()
        token_time = time.perf_counter() - began
        agree = np.abs(full.logits[refined.exact] - refined.logits[refined.exact]).max()
        rows += [
            (f"occlusion, {count} tokens: one forward", f"{one * 1e3:.0f} ms"),
            (
                "coarse row (every block)",
                f"{coarse_at[0]:.2f} s = {coarse_at[0] / one:.1f}x the forward (target <= 10x), {len(refined.blocks)} blocks",
            ),
            (
                "whole refined answer",
                f"{whole:.2f} s, {int(refined.exact.sum())} tokens refined, {refined.requests} requests",
            ),
            ("token by token (resolution='token')", f"{token_time:.2f} s, {full.requests} requests"),
            ("refined / token by token (target <= 0.35)", f"{whole / token_time:.2f}"),
            ("refined tokens vs token by token, max |Δ logit|", f"{agree:.2e}"),
        ]
    if not args.skip_lens:
        for tokens in (312, 2048):
            text = paragraph(tokenizer, tokens)
            count = len(tokenizer(text)["input_ids"])
            shown = session.prompt(text).result()
            assert shown.kept is not None, "the streams were not kept"
            windows = [(start, start + 32) for start in range(0, count - 32, max(1, (count - 32) // 6))][:6]
            samples = []
            for start, stop in windows:
                began = time.perf_counter()
                session.lens(text, start, stop).result()
                samples.append(time.perf_counter() - began)
            move = sorted(samples)[len(samples) // 2]
            alone = session.request(arithmetic(shown.kept, 0, 32, 5)).result()
            raw = median_seconds(lambda: session.request(forward(text)).result(), 1, warmup=1)
            rows += [
                (f"lens window move, {count} tokens (32 positions, no forward)", f"{move * 1e3:.0f} ms"),
                ("the lens's own arithmetic for the window", f"{alone * 1e3:.0f} ms"),
                ("move / arithmetic (target <= 1.2)", f"{move / alone:.2f}"),
                ("one forward of the prompt (what a move cost before)", f"{raw * 1e3:.0f} ms"),
            ]
    session.close()
    return report("Long work answers early (trained model, CPU engine)", rows)


if __name__ == "__main__":
    main(sys.argv[1:])
