"""Steer and occlude on the trained model (SmolLM2-135M), against their floors in the same run.

    python bench/causal.py

* Occlusion of every position of a prompt of N tokens (replaced by a space) against the
  batched forward of N + 1 prompts of that length in requests of the same size, saving
  the same two numbers per prompt: what the occlusion adds to the forwards it needs.
  Target (issue 24): within 1.5x.
* Steering (`session.steer`: the steered and the plain continuation, one request) against
  the same request without the addition (two invokes reading the same per-step lens):
  what adding the vector at every step costs. Target: under 10% (ratio 1.10).
"""

from __future__ import annotations

import sys

import numpy as np

from common import ENGINE_KWARGS, median_seconds, report

PROMPT = "The Eiffel Tower is in the city of Paris, and the Colosseum is in the city of Rome. " * 8
STEER_TOKENS = 16


def batched_forward(prompts: list[list[int]], answer: int, chunk: int):
    def run(model):
        rows = []
        root = model.root_only()  # as occlusion reads the logits: without shipping the tree
        for start in range(0, len(prompts), chunk):
            part = prompts[start : start + chunk]
            with model.trace(temperature=0.0, max_tokens=1) as tracer:
                got = [None] * len(part)
                got.save()
                for index in range(len(part)):
                    ids = part[index]
                    with tracer.invoke(ids):
                        logits = root.logits[0, -1].float()
                        got[index] = (float(logits[answer]), float(logits.softmax(-1)[answer]))
            rows.extend(got)
        return rows

    return run


def unsteered(prompt: str, max_tokens: int):
    from nnterp_widgets.requests.generation import step_reads

    def run(model):
        with model.trace(temperature=0.0, max_tokens=max_tokens) as tracer:
            out = dict().save()
            with tracer.invoke(prompt):
                first = list()
                for step in tracer.iter[:max_tokens]:
                    first.append(step_reads(model, step, 5, None))
                out["a"] = first
            with tracer.invoke(prompt):
                second = list()
                for step in tracer.iter[:max_tokens]:
                    second.append(step_reads(model, step, 5, None))
                out["b"] = second
        return out

    return run


def main() -> str:
    from nnterp_widgets.checkpoints import trained
    from nnterp_widgets.session import Session
    from nnterp_widgets.interventions.occlusion import OCCLUDE_INVOKES, neutral_token, variants

    session = Session.open(trained(), progress=False, max_model_len=512, **ENGINE_KWARGS).wait()
    tokenizer = session.tokenizer()
    ids = tokenizer(PROMPT)["input_ids"][:128]
    text = tokenizer.decode(ids)
    ids = tokenizer(text)["input_ids"]
    answer = tokenizer(" Paris", add_special_tokens=False)["input_ids"][0]
    neutral = session.request(neutral_token, key="neutral").result()[0]
    prompts = [ids] + variants(ids, "replace", neutral)
    occlude = median_seconds(lambda: session.occlude(text, answer).result(), repeat=3, warmup=1)
    floor = median_seconds(
        lambda: session.request(batched_forward(prompts, answer, OCCLUDE_INVOKES), key="floor").result(),
        repeat=3,
        warmup=1,
    )
    short = "The Eiffel Tower is in the city of"
    vector = np.asarray(session.steering_vector("Rome is in Italy.", "Paris is in France.", 15).result())
    steer = median_seconds(lambda: session.steer(short, vector, 15, 4.0, STEER_TOKENS).result(), repeat=5, warmup=1)
    plain = median_seconds(
        lambda: session.request(unsteered(short, STEER_TOKENS), key="plain").result(), repeat=5, warmup=1
    )
    session.close()
    return report(
        "Steer and occlude on the trained model (SmolLM2-135M, CPU)",
        [
            (f"occlusion of {len(ids)} positions (replace)", f"{occlude:.2f} s"),
            (f"batched forward of {len(prompts)} prompts", f"{floor:.2f} s"),
            ("occlusion / batched forward", f"{occlude / floor:.2f}"),
            (f"steer: steered + plain, {STEER_TOKENS} tokens each", f"{steer:.2f} s"),
            ("the same request without the addition", f"{plain:.2f} s"),
            ("steered / unsteered", f"{steer / plain:.2f}"),
        ],
    )


if __name__ == "__main__":
    main()
    sys.exit(0)
