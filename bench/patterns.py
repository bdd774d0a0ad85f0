"""Whole attention patterns for a script: `session.patterns` on the trained model (CPU).

    python bench/patterns.py

One session on `checkpoints.trained()` (30 layers, 9 heads). Per prompt length (128 and
512 tokens), every layer's exact float32 pattern in one request (`session.patterns`:
30 x 9 x tokens² floats, 283 MB at 512) against two floors on the same engine, in the
same run: the raw forward (one trace saving the logits) and the raw trace a user would
write for the same data (one trace saving every layer's ``attention_probabilities`` as
float32 on the CPU). Target (issue 37): within 1.2x the raw trace at 512 tokens.
"""

from __future__ import annotations

from common import ENGINE_KWARGS, median_seconds, report
from scale import prompt_of, raw_forward

LENGTHS = (128, 512)


def raw_patterns(text: str):
    def run(model):
        with model.trace(text, temperature=0.0, max_tokens=1):
            out = list().save()
            for layer in model.layers:
                out.append(layer.self_attn.attention_probabilities[0].float().cpu())
        return out

    return run


def main() -> str:
    from nnterp_widgets.checkpoints import trained
    from nnterp_widgets.session import Session

    session = Session.open(trained(), progress=False, max_model_len=1024, **ENGINE_KWARGS).wait()
    tokenizer = session.tokenizer()
    rows = []

    def timed(fn):
        return median_seconds(fn, repeat=5, warmup=1)

    try:
        for tokens in LENGTHS:
            text = prompt_of(tokenizer, tokens)
            forward = timed(lambda: session.request(raw_forward(text)).result())
            raw = timed(lambda: session.request(raw_patterns(text)).result())
            whole = timed(lambda: session.patterns(text).result())
            rows += [
                (f"{tokens} tokens: raw forward", f"{forward * 1e3:.0f} ms"),
                (
                    f"{tokens} tokens: raw trace saving every pattern",
                    f"{raw * 1e3:.0f} ms ({raw / forward:.2f}x forward)",
                ),
                (f"{tokens} tokens: session.patterns", f"{whole * 1e3:.0f} ms ({whole / raw:.2f}x the raw trace)"),
            ]
    finally:
        session.close()
    return report("Whole patterns (session.patterns, trained model, CPU)", rows)


if __name__ == "__main__":
    main()
