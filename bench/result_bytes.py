"""What a request's bytes cost on their way from the engine to the kernel's process.

    python bench/result_bytes.py [8,16]

One session on `checkpoints.trained()` with the engine in its own processes
(``in_process=False``, as on a GPU). Each request is the raw forward (one trace saving
the logits) that also returns N MB made on the worker, as a torch tensor, a numpy array or
bytes, and the same forward returning `SMALL` small results (a batch's); the floor is the
same forward returning nothing (N = 0), in the same run. A ``parcel`` is a numpy array
sent through shared memory (`engine.parcels`). Medians of 5 after a warm-up. On the GPU
(docs/gpu.md, run 11) the prompt request's 9 MB of pattern cost about 5 ms a megabyte; this says whether the object's kind matters or the
crossing itself.
"""

from __future__ import annotations

import sys

import torch
from common import median_seconds, report

from nnterp_widgets.engine import parcel

KINDS = ("tensor", "numpy", "bytes", "parcel")
#: Small results in one request: a 64-prompt batch's five each (ids, the lens's two, the
#: model's top two), each [30, 1, 5] floats here.
SMALL = 320


def request(megabytes: int, kind: str):
    def run(engine):
        with engine.trace("The capital of France is", temperature=0.0, max_tokens=1):
            made = torch.zeros(max(1, megabytes * 2**20), dtype=torch.uint8)
            if kind == "numpy":
                out = made.numpy().save()
            elif kind == "parcel":
                out = parcel(made.numpy()).save()
            elif kind == "bytes":
                out = made.numpy().tobytes().save()
            else:
                out = made.save()
            engine.logits.save()
        return out

    return run


def small_results(count: int, kind: str):
    """The raw forward also returning ``count`` small results (as a batch's prompts do)."""

    def run(engine):
        with engine.trace("The capital of France is", temperature=0.0, max_tokens=1):
            out = list().save()
            for _ in range(count):
                made = torch.rand(30, 1, 5)
                out.append(made.numpy() if kind == "numpy" else made)
            engine.logits.save()
        return out

    return run


def main(argv: list[str] | None = None) -> str:
    from nnterp_widgets.checkpoints import trained
    from nnterp_widgets.session import Session

    sizes = [int(n) for n in (argv[0] if argv else "8,16").split(",")]
    rows = []
    session = Session.open(str(trained()), progress=False, in_process=False).wait()

    def median_ms(run) -> float:
        return median_seconds(lambda: session.request(run).result(120), repeat=5, warmup=1) * 1e3

    try:
        floor = median_ms(request(0, "tensor"))
        rows.append(("floor (nothing returned)", f"{floor:.1f} ms"))
        for kind in KINDS:
            for megabytes in [size for size in sizes if size]:
                ms = median_ms(request(megabytes, kind))
                over = (ms - floor) / megabytes
                rows.append(
                    (f"{kind} {megabytes} MB", f"{ms:.1f} ms ({ms / floor:.2f}x the floor, {over:.1f} ms a MB)")
                )
        for kind in ("tensor", "numpy"):
            ms = median_ms(small_results(SMALL, kind))
            each = (ms - floor) / SMALL * 1e3
            rows.append((f"{kind} x {SMALL} small", f"{ms:.1f} ms ({ms / floor:.2f}x the floor, {each:.0f} us each)"))
    finally:
        session.close()
    return report("A result's bytes from the engine's processes to the kernel's (trained model, CPU)", rows)


if __name__ == "__main__":
    main(sys.argv[1:])
