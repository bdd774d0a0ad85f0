"""Will a request fit in the engine's memory? An estimate from the shapes, before it runs.

Most of a request's memory is vLLM's own and fixed when the engine starts (weights, KV
cache). What grows with the prompt is ours: a whole recomputed attention pattern is
``heads x tokens²`` floats, a few copies of it at once while it is scored and softmaxed
(`Session.patterns`, the head roles, the contribution graph read it whole); the pattern
the explorer ships is recomputed a block of rows at a time (``row_blocks``: one block's
copies and the layer's queries and keys); on the CPU the forward's activations are
``tokens x width`` (on a GPU they are inside what vLLM profiled and reserved at its
start). At 13,000 tokens on a 0.5B shape one layer's whole pattern is 10 GB a copy:
without this check such a request grows the engine until the machine or the GPU runs
out of memory (on the CPU the engine dies, and, with the engine in the kernel's process,
the kernel with it)::

    check_memory(model, tokens=13_475, patterns=1)   # MemoryRefused, saying why and what fits
"""

from __future__ import annotations


from ..requests import pattern_block, rows_at_once, rows_bytes_on
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
    """The free memory where the engine computes: the machine's available memory on the
    CPU; on a GPU the least free on the visible devices (NVML: no CUDA context in this
    process), what is left beside vLLM's reservation. None where it cannot be read."""
    from ..engine.platform import on_cpu

    if on_cpu():
        import psutil

        return int(psutil.virtual_memory().available)
    return _gpu_free_bytes()


def _gpu_free_bytes() -> int | None:
    import os

    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no NVML (not an NVIDIA GPU): no estimate to hold
        return None
    try:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible:
            handles = [
                pynvml.nvmlDeviceGetHandleByIndex(int(name))
                if name.strip().isdigit()
                else pynvml.nvmlDeviceGetHandleByUUID(name.strip())
                for name in visible.split(",")
                if name.strip()
            ]
        else:
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        return min(int(pynvml.nvmlDeviceGetMemoryInfo(handle).free) for handle in handles) if handles else None
    except Exception:  # noqa: BLE001 - a device NVML cannot read: no estimate
        return None
    finally:
        pynvml.nvmlShutdown()


def request_bytes(
    model,
    tokens: int,
    patterns: int = 0,
    extra: int = 0,
    row_blocks: int = 0,
    forward: bool = True,
    device: str = "cpu",
    free: int | None = None,
) -> int:
    """The estimate: ``patterns`` layers' whole patterns at once, ``row_blocks`` layers'
    patterns recomputed a block of rows at a time (the shipped pattern, in ``device``'s
    blocks for ``free`` bytes: `rows_bytes_on`), the forward's activations (``forward``:
    where they are not vLLM's own), and ``extra`` bytes the request keeps of its own."""
    width = max(model.hidden_size, model.intermediate_size or 0)
    heads = model.num_heads
    pattern = patterns * PATTERN_COPIES * heads * tokens * tokens * 4
    if row_blocks:
        rows = min(tokens, rows_at_once(heads, tokens, pattern_block(tokens), rows_bytes_on(device, free)))
        # Besides the rows: the layer's queries and keys as read (at most 4 bytes an
        # element) and the keys' float copy.
        kv_heads = getattr(model, "num_kv_heads", None) or heads
        reads = tokens * model.head_dim * (4 * heads + 8 * kv_heads)
        pattern += row_blocks * (PATTERN_COPIES * heads * rows * tokens * 4 + reads)
    activations = ACTIVATION_COPIES * tokens * width * 4 if forward else 0
    return pattern + activations + extra


def check_memory(
    model,
    tokens: int,
    patterns: int = 0,
    extra: int = 0,
    limit: int | None = None,
    advice: str = "",
    row_blocks: int = 0,
    forward: bool | None = None,
) -> None:
    """Refuse (`MemoryRefused`) a request whose estimate (`request_bytes`) exceeds
    `HEADROOM` of the free memory, or of ``limit`` bytes when given (tests lower it to
    see the refusal). ``forward``: count the forward's activations (default: on the CPU,
    where they are not inside vLLM's reservation)."""
    free = free_bytes() if limit is None else int(limit)
    if free is None:
        return
    from ..engine.platform import on_cpu

    device = "cpu" if on_cpu() else "cuda"
    if forward is None:
        forward = device == "cpu"

    def need(count: int) -> int:
        share = extra * count // max(1, tokens)
        return request_bytes(model, count, patterns, share, row_blocks, forward, device, free)

    if need(tokens) <= HEADROOM * free:
        return
    fits = tokens
    while fits > 1 and need(fits) > HEADROOM * free:
        fits = int(fits * 0.9)
    if patterns:
        what = f"{patterns} layer pattern(s) of {model.num_heads} heads x {tokens}² tokens"
    elif row_blocks:
        what = f"a pattern of {model.num_heads} heads x {tokens} tokens, a block of rows at a time"
    else:
        what = "activations"
    raise MemoryRefused(
        REFUSED.format(need=need(tokens) / 1e9, what=what, free=free / 1e9, fits=max(1, fits), advice=advice) + "."
    )


__all__ = ["HEADROOM", "MemoryRefused", "check_memory", "free_bytes", "request_bytes"]
