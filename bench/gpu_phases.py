"""On a GPU: where the explorer's prompt request spends its time at a long prompt.

    python bench/gpu_phases.py [--checkpoint llama3.1_8b] [--tokens 8192] [--repeat 5]

One session; each phase is one trace on the same engine, median of ``--repeat`` runs:
the raw forward (logits only), the forward plus one layer's pattern as the prompt request
ships it (recomputed, max-pooled, quantised), the forward plus the lens's own arithmetic
(32 positions, every layer), and the prompt request itself. Prints a table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import bench_checkpoint  # noqa: E402
from gpu_prompt import prompt_of  # noqa: E402


def median_ms(fn, repeat: int) -> float:
    fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint", default="llama3.1_8b")
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    import torch

    from nnterp_widgets.session import Session
    from nnterp_widgets.requests.attention import pattern_block, pattern_payload

    session = Session.open(bench_checkpoint(args.checkpoint), progress=False, max_model_len=args.tokens + 64).wait()
    text = prompt_of(session.tokenizer(), args.tokens)
    block = pattern_block(args.tokens, session.pattern_side)

    def raw(engine):
        with engine.trace(text, temperature=0.0, max_tokens=1):
            out = engine.logits.cpu().save()
        return out

    def pattern(engine):
        with engine.trace(text, temperature=0.0, max_tokens=1):
            attention = engine.layers[0].self_attn
            found = pattern_payload(attention, attention.attention_queries, attention.attention_keys, block)
            out = list(found).save()
        return out

    def lens(engine):
        with engine.trace(text, temperature=0.0, max_tokens=1):
            out = list().save()
            for layer in engine.layers:
                top = torch.softmax(engine.project_on_vocab(layer.layer_output[0, -32:]).float(), -1).topk(5)
                out.append(top.indices.cpu())
        return out

    rows = []
    for name, fn in (("raw forward", raw), ("forward + one layer's pattern", pattern), ("forward + lens", lens)):
        rows.append((name, median_ms(lambda fn=fn: session.request(fn, key="phase").result(), args.repeat)))
    rows.append(("prompt request", median_ms(lambda: session.prompt(text).result(), args.repeat)))
    print(f"| phase ({args.checkpoint}, {args.tokens} tokens, {session.device}, {session.dtype}) | median ms |")
    print("|---|---|")
    for name, ms in rows:
        print(f"| {name} | {ms:.0f} |")
    session.close()


if __name__ == "__main__":
    main()
