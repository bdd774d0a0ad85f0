"""The prompt's streams, kept on the engine's side: a lens window move without a forward.

The prompt request (`prompt.run_prompt`) keeps, in the engine's worker, every layer's
output stream of the prompt and the modules the lens runs them through (the final norm,
the unembedding and the logits processor), under a key (`stream_key`). A later window of
the same prompt's lens is then the lens's own arithmetic on those streams, run in the
worker through vLLM's ``apply_model`` (`run_kept_lens`): no forward pass::

    key = stream_key(prompt, heads)          # kept by run_prompt(..., keep=key)
    grid = run_kept_lens(model, key, tokens, start, stop)   # None where nothing is kept

What is kept is bounded: the newest `KEPT_PROMPTS` prompts, each at most `KEPT_BYTES`
(a longer prompt's streams are not kept, and its window moves run a forward as before),
and dropped when a newer prompt replaces it.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import torch

from .common import LENS_K, Tokens, top_k

#: Prompts whose streams stay kept (the prompt on screen and the one before it).
KEPT_PROMPTS = 2
#: The most one prompt's kept streams may weigh (layers x tokens x hidden, float32).
KEPT_BYTES = 512 << 20

#: In the engine's worker process: key -> (streams [layers, tokens, hidden], norm, head,
#: logits processor, bias). Filled from inside a trace (the worker runs the trace's code).
_KEPT: "OrderedDict[str, tuple]" = OrderedDict()


def stream_key(prompt: str, heads: tuple) -> str:
    """The key a prompt's streams are kept under (its text and the heads ablated)."""
    return repr((prompt, tuple(heads)))


def keep_bytes(layers: int, tokens: int, hidden: int) -> int:
    return layers * tokens * hidden * 4


def keep(key: str, streams: list, norm: Any, head: Any, processor: Any, bias: Any) -> None:
    """Inside a trace (in the worker): keep ``streams`` (each layer's ``[tokens, hidden]``)
    and the lens's modules under ``key``; the oldest prompt beyond `KEPT_PROMPTS` is dropped."""
    # A value read is the worker's private copy already; stacking them is the one copy kept.
    _KEPT[key] = (torch.stack([stream.detach() for stream in streams]), norm, head, processor, bias)
    _KEPT.move_to_end(key)
    while len(_KEPT) > KEPT_PROMPTS:
        _KEPT.popitem(last=False)


def kept_rows(key: str, start: int, stop: int, k: int = LENS_K) -> tuple | None:
    """In the worker (``apply_model``): the lens rows of positions ``start .. stop - 1`` of
    the streams kept under ``key`` (top-k probabilities and ids per layer, on the CPU), or
    None where nothing is kept."""
    found = _KEPT.get(key)
    if found is None:
        return None
    streams, norm, head, processor, bias = found
    window = streams[:, start:stop]
    layers, width, hidden = window.shape
    flat = window.reshape(-1, hidden)
    weight = getattr(head, "weight", None)
    if isinstance(weight, torch.Tensor) and weight.is_floating_point():
        flat = flat.to(weight.dtype)
    with torch.inference_mode():
        normed = norm(flat)
        if isinstance(normed, tuple):
            normed = normed[0]
        logits = processor(head, normed, bias)
        probs, ids = top_k(logits.reshape(layers, width, -1), k)
    return probs, ids


def run_kept_lens(model, key: str, tokens: Tokens, start: int, stop: int, k: int = LENS_K, model_top=None):
    """The lens grid of a window from the streams kept under ``key`` (no forward), or None
    where the engine keeps none (or cannot run code in its worker)."""
    from .lens import lens_grid

    try:
        (rows,) = model.vllm_entrypoint.apply_model(lambda _: kept_rows(key, start, stop, k))[:1]
    except Exception:  # noqa: BLE001 - an engine that cannot: the caller runs a forward
        return None
    if rows is None:
        return None
    return lens_grid(model, tokens, rows, model_top, start)  # (probs, ids), each [layers, width, k]
