"""Will a request fit in the engine's memory? An estimate from the shapes, before it runs.

Most of a request's memory is vLLM's own and fixed when the engine starts (weights, KV
cache). What grows with the prompt is ours: a recomputed attention pattern is
``heads x tokens²`` floats, a few copies of it at once while it is scored, softmaxed and
pooled, and the forward's activations are ``tokens x width``. At 13,000 tokens on a
0.5B shape one layer's pattern is 10 GB a copy: without this check such a prompt grows
the engine until the machine runs out of memory and the engine dies (and, with the
engine in the kernel's process, the kernel with it)::

    check_memory(model, tokens=13_475, patterns=1)   # MemoryRefused, saying why and what fits
"""

from __future__ import annotations


from ..requests.common import RequestRefused

#: Copies of one layer's ``[heads, tokens, tokens]`` float32 pattern alive at once while
#: it is recomputed (the scores, their softmax, the pooled or quantised copy).
PATTERN_COPIES = 3
#: Copies of a ``[tokens, width]`` float32 activation alive at once in a forward.
ACTIVATION_COPIES = 6
#: The share of the free memory a request may plan to use (the rest is the estimate's margin).
HEADROOM = 0.7
#: What a refusal says.
REFUSED = (
    "this request would need about {need:.1f} GB more memory on the engine's machine "
    "({what}), and {free:.1f} GB is free: the engine would run out of memory and die. "
    "Shorten the prompt to about {fits} tokens or fewer{advice}"
)


class MemoryRefused(RequestRefused):
    """A request refused before it runs: it would not fit in the engine's memory."""


def free_bytes() -> int | None:
    """The machine's available memory where the engine computes in it (the CPU); None on
    a GPU, where running out is a recoverable error of the request (torch's out-of-memory
    error, reported like any failure) and vLLM holds most of the device by design."""
    from ..engine.platform import on_cpu

    if not on_cpu():
        return None
    import psutil

    return int(psutil.virtual_memory().available)


def request_bytes(model, tokens: int, patterns: int = 0, extra: int = 0) -> int:
    """The estimate: ``patterns`` layers' patterns at once, the forward's activations,
    and ``extra`` bytes the request keeps of its own."""
    width = max(model.hidden_size, model.intermediate_size or 0)
    pattern = patterns * PATTERN_COPIES * model.num_heads * tokens * tokens * 4
    return pattern + ACTIVATION_COPIES * tokens * width * 4 + extra


def check_memory(
    model, tokens: int, patterns: int = 0, extra: int = 0, limit: int | None = None, advice: str = ""
) -> None:
    """Refuse (`MemoryRefused`) a request whose estimate exceeds `HEADROOM` of the free
    memory, or of ``limit`` bytes when given (tests lower it to see the refusal)."""
    free = free_bytes() if limit is None else int(limit)
    if free is None:
        return
    need = request_bytes(model, tokens, patterns, extra)
    if need <= HEADROOM * free:
        return
    fits = tokens
    while fits > 1 and request_bytes(model, fits, patterns, extra * fits // max(1, tokens)) > HEADROOM * free:
        fits = int(fits * 0.9)
    what = f"{patterns} layer pattern(s) of {model.num_heads} heads x {tokens}² tokens" if patterns else "activations"
    raise MemoryRefused(
        REFUSED.format(need=need / 1e9, what=what, free=free / 1e9, fits=max(1, fits), advice=advice) + "."
    )


__all__ = ["HEADROOM", "MemoryRefused", "check_memory", "free_bytes", "request_bytes"]
