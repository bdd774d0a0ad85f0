"""The attention block: its contribution to the stream and its interior.

vLLM's attention block computes q, k, v (after rotary) and hands them to one
`Attention` module (the kernel, with the KV cache), whose output goes to the output
projection. So the interior is read at that module: its inputs are the queries, keys
and values, its output the heads' outputs. The pattern never exists as a tensor (the
kernel fuses it), so it is recomputed from this step's queries and keys with the
layer's own scale, softcap, ALiBi slopes, sliding window and grouped kv heads.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from nnsight.intervention.interleaver import Mediator

from ...errors import Unavailable
from .layer import StandardEnvoy, _contribution, _tensor_out, _tensor_out_back
from .values import StandardValue, matching

#: Why the pattern is not served on a decode step.
DECODE = (
    "recomputed from this step's queries and keys, and on a decode step the earlier "
    "tokens' keys are in vLLM's cache, which only its kernel reads; read it on the prefill"
)

#: The standard names an attention block serves, in ``support()`` order.
ATTENTION_VALUES = (
    "attention_output",
    "attention_queries",
    "attention_keys",
    "attention_values",
    "attention_head_outputs",
    "attention_scores",
    "attention_probabilities",
)
#: The values inside the block (what latent attention cannot serve).
INTERIOR = ATTENTION_VALUES[1:]


def _kernel(attention) -> torch.nn.Module:
    return getattr(attention, attention.KERNEL)._module


def _kernel_in(attention) -> str:
    return f"{attention.path}.{attention.KERNEL}.input"


def _kernel_out(attention) -> str:
    return f"{attention.path}.{attention.KERNEL}.output"


def _qkv(attention, raw: Any) -> inspect.BoundArguments:
    args, kwargs = raw
    kernel = _kernel(attention)
    return inspect.signature(type(kernel).forward).bind(kernel, *args, **kwargs)


def _geometry(kernel: torch.nn.Module, which: str) -> tuple[int, int]:
    if which == "query":
        return kernel.num_heads, kernel.head_size
    if which == "key":
        return kernel.num_kv_heads, kernel.head_size
    return kernel.num_kv_heads, getattr(kernel, "head_size_v", kernel.head_size)


def _split_heads(which: str):
    """Read one of q/k/v as ``[1, heads, tokens, head_dim]``."""

    def read(attention, raw):
        flat = _qkv(attention, raw).arguments[which]
        heads, size = _geometry(_kernel(attention), which)
        return flat.reshape(-1, heads, size).transpose(0, 1).unsqueeze(0).clone()

    def write(attention, raw, value):
        bound = _qkv(attention, raw)
        flat = bound.arguments[which]
        bound.arguments[which] = matching(value[0].transpose(0, 1).reshape(flat.shape), flat).contiguous()
        return (bound.args[1:], bound.kwargs)

    return read, write


def _head_outputs(attention, raw):
    kernel = _kernel(attention)
    size = getattr(kernel, "head_size_v", kernel.head_size)
    return raw.reshape(-1, kernel.num_heads, size).unsqueeze(0).clone()


def _head_outputs_back(attention, raw, value):
    return matching(value.reshape(raw.shape), raw).contiguous()


def recompute_scores(
    query: torch.Tensor,
    key: torch.Tensor,
    scale: float,
    softcap: float | None = None,
    alibi_slopes: torch.Tensor | None = None,
    sliding_window: int | None = None,
) -> torch.Tensor:
    """Masked attention scores ``[heads, query, key]`` of one prefill.

    ``query`` is ``[tokens, heads, head_dim]``, ``key`` ``[tokens, kv_heads, head_dim]``
    (grouped kv heads are repeated). Masked entries are ``-inf``.
    """
    heads, kv_heads = query.shape[1], key.shape[1]
    key = key.repeat_interleave(heads // kv_heads, dim=1)
    scores = torch.einsum("qhd,khd->hqk", query.float(), key.float()) * scale
    if softcap:
        scores = softcap * torch.tanh(scores / softcap)
    tokens = query.shape[0]
    position = torch.arange(tokens, device=scores.device)
    distance = position[:, None] - position[None, :]  # query - key
    if alibi_slopes is not None:
        scores = scores - alibi_slopes.to(scores)[:, None, None] * distance
    hidden = distance < 0
    if sliding_window is not None and sliding_window > 0:
        hidden = hidden | (distance >= sliding_window)
    return scores.masked_fill(hidden, float("-inf"))


def _scores(attention, raw):
    kernel = _kernel(attention)
    impl = kernel.impl
    arguments = _qkv(attention, raw).arguments
    query = arguments["query"].reshape(-1, kernel.num_heads, kernel.head_size)
    key = arguments["key"].reshape(-1, kernel.num_kv_heads, kernel.head_size)
    window = getattr(kernel, "sliding_window", None)
    return recompute_scores(
        query,
        key,
        impl.scale,
        softcap=getattr(impl, "logits_soft_cap", None) or None,
        alibi_slopes=getattr(impl, "alibi_slopes", None),
        sliding_window=window,
    ).unsqueeze(0)


def _probabilities(attention, raw):
    return torch.softmax(_scores(attention, raw), dim=-1)


class PrefillValue(StandardValue):
    """A value that exists on the prefill only: a decode step raises before it parks."""

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        self._check(obj)
        location = self._location(obj)
        if Mediator.current(location).wanted(location) > 0:
            raise Unavailable(obj.path, self.name, DECODE)
        return super().__get__(obj, owner)


_queries = _split_heads("query")
_keys = _split_heads("key")
_values = _split_heads("value")


class Attention(StandardEnvoy):
    """A block's self-attention; ``KERNEL`` names vLLM's `Attention` module inside it."""

    KERNEL = "attn"

    attention_output = StandardValue("attention_output", _contribution, _tensor_out, _tensor_out_back)
    attention_queries = StandardValue("attention_queries", _kernel_in, *_queries)
    attention_keys = StandardValue("attention_keys", _kernel_in, *_keys)
    attention_values = StandardValue("attention_values", _kernel_in, *_values)
    attention_head_outputs = StandardValue(
        "attention_head_outputs", _kernel_out, _head_outputs, _head_outputs_back
    )
    attention_scores = PrefillValue(
        "attention_scores", _kernel_in, _scores,
        read_only="attention_scores is derived and read-only",
    )
    attention_probabilities = PrefillValue(
        "attention_probabilities", _kernel_in, _probabilities,
        read_only="attention_probabilities is derived and read-only",
    )
