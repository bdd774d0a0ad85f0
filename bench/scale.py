"""The explorer at real size: a Qwen2.5-0.5B-shaped checkpoint at 512 and 2,048 tokens.

Against the raw forward on the same engine (one plain trace saving only the logits):
the prompt request that paints the explorer (tokens, prediction, the lens over its
default window, the shown layer's pattern at one byte a cell, max-pooled to at most
`PATTERN_SIDE` cells a side, with head thumbnails), a layer switch (one request), a lens
window move and a zoom (the exact cells of the last `PATTERN_SIDE` tokens, one request). Bytes returned: the pickled result,
as it crosses from the engine (the arrays it holds). Targets (issue 12): at 512 tokens
at most 3x the raw forward and 16 MB; at 2,048 at most 4x and 64 MB.

One 0.5B engine at a time (about 2 GB of weights); run with `/work/slot --all`.
"""

from __future__ import annotations

import pickle
import statistics
import sys
import time

from common import ENGINE_KWARGS, report

LENGTHS = (512, 2048)
REPEAT = {512: 3, 2048: 2}
SENTENCE = "The Eiffel Tower is in Paris and the Colosseum is in Rome. "


def prompt_of(tokenizer, count: int) -> str:
    """A text that tokenises to exactly ``count`` tokens."""
    ids = tokenizer(SENTENCE * (count // 4 + 8))["input_ids"]
    for extra in range(0, 16):
        text = tokenizer.decode(ids[: count + extra])
        if len(tokenizer(text)["input_ids"]) == count:
            return text
    raise RuntimeError(f"no text of exactly {count} tokens")


def raw_forward(text: str):
    def run(model):
        with model.trace(text, temperature=0.0, max_tokens=1):
            logits = model.logits.cpu().save()
        return logits

    return run


def timed(fn, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main(lengths=LENGTHS) -> str:
    from nnterp_widgets.checkpoints import bench_checkpoint
    from nnterp_widgets.session import Session

    settings = dict(ENGINE_KWARGS, max_model_len=max(lengths) + 64)
    session = Session.open(bench_checkpoint("qwen2_0.5b"), progress=False, **settings).wait()
    tokenizer = session.tokenizer()
    rows = []
    for count in lengths:
        text = prompt_of(tokenizer, count)
        repeat = REPEAT.get(count, 2)
        session.request(raw_forward(text), key="warm").result()  # first request of a length warms up
        raw = timed(lambda: session.request(raw_forward(text), key="raw").result(), repeat)
        results = []
        painted = timed(lambda: results.append(session.prompt(text, key=f"bench-{count}").result()), repeat)
        result = results[-1]
        sent = len(pickle.dumps(result))
        before = session.engine_requests
        start = time.perf_counter()
        session.attention(text, 12, key=f"bench-{count}").result()
        switch = time.perf_counter() - start
        switch_requests = session.engine_requests - before
        start = time.perf_counter()
        session.attention(text, 12, key=f"bench-{count}").result()
        cached = time.perf_counter() - start
        start = time.perf_counter()
        lens = session.lens(text, 0, 32, key=f"bench-{count}").result()
        moved = time.perf_counter() - start
        corner = max(0, count - session.pattern_side)  # the last queries and keys, exact
        start = time.perf_counter()
        zoom = session.attention(text, 12, key=f"bench-{count}", window=(corner, corner)).result()
        zoomed = time.perf_counter() - start
        rows += [
            (f"{count} tokens: raw forward (median of {repeat})", f"{raw:.2f} s"),
            (f"{count} tokens: prompt request (median of {repeat})", f"{painted:.2f} s"),
            (f"{count} tokens: ratio prompt / raw", f"{painted / raw:.2f}"),
            (f"{count} tokens: bytes returned (pickled result)", f"{sent / 1e6:.1f} MB"),
            (
                f"{count} tokens: layer switch",
                f"{switch_requests} request, {switch:.2f} s "
                f"({switch / raw:.2f}x raw); again: {cached * 1e3:.1f} ms, cached",
            ),
            (
                f"{count} tokens: lens window move (32 positions)",
                f"{moved:.2f} s ({moved / raw:.2f}x raw), {lens.top_ids.nbytes + lens.top_probs.nbytes} B",
            ),
            (
                f"{count} tokens: shown pattern",
                f"{result.attention.rows}^2 cells a head, blocks of {result.attention.block}",
            ),
            (
                f"{count} tokens: zoom (exact {zoom.rows}x{zoom.cols} window)",
                f"1 request, {zoomed:.2f} s ({zoomed / raw:.2f}x raw), {len(pickle.dumps(zoom)) / 1e6:.1f} MB",
            ),
        ]
    session.close()
    return report("Real size: Qwen2.5-0.5B shape (random weights, float32), prompt request vs raw forward", rows)


if __name__ == "__main__":
    main(tuple(int(n) for n in sys.argv[1:]) or LENGTHS)
