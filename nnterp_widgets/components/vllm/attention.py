"""The attention block: its contribution to the stream and its interior.

vLLM's attention block computes q, k, v (after rotary) and hands them to one
`Attention` module (the kernel, with the KV cache), whose output goes to the output
projection. So the interior is read at that module: its inputs are the queries, keys
and values, its output the heads' outputs. The pattern never exists as a tensor (the
kernel fuses it), so it is recomputed from this step's queries and keys with the
layer's own scale, softcap, ALiBi slopes, sliding window and grouped kv heads.

Under tensor parallelism each worker's kernel holds its own share of the heads, so
every per-head value is gathered across the group into the model's head order on
the way in and cut back to the worker's share on the way out (`_heads`). Every
rank runs the same intervention, so every rank reaches the same collectives.
"""

from __future__ import annotations

import inspect
import weakref
from typing import Any

import torch
from nnsight.intervention.interleaver import Mediator

from ...errors import Unavailable
from .. import module_of
from .layer import StandardEnvoy, bound_forward, contribution_site, tensor_out, tensor_out_back
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
    return module_of(getattr(attention, attention.KERNEL))


def _kernel_in(attention) -> str:
    return f"{attention.path}.{attention.KERNEL}.input"


def _kernel_out(attention) -> str:
    return f"{attention.path}.{attention.KERNEL}.output"


def _qkv(attention, raw: Any) -> inspect.BoundArguments:
    args, kwargs = raw
    return bound_forward(_kernel(attention), args, kwargs)


def _geometry(kernel: torch.nn.Module, which: str) -> tuple[int, int]:
    if which == "query":
        return kernel.num_heads, kernel.head_size
    if which == "key":
        return kernel.num_kv_heads, kernel.head_size
    return kernel.num_kv_heads, getattr(kernel, "head_size_v", kernel.head_size)


def _sharding(attention) -> tuple[int, int, int]:
    """``(rank, workers, kv_replicas)``: how the block's heads are split across workers.

    Read off the block's own parallel projection (what vLLM sharded the heads by), so
    a block built unsplit (``disable_tp``) reads as one worker whatever the engine's
    size. When there are fewer kv heads than workers vLLM gives each worker one kv
    head, replicated ``kv_replicas`` times across consecutive ranks.
    """
    module = module_of(attention)
    found = _SHARDINGS.get(module)
    if found is None:
        found = _SHARDINGS[module] = _sharding_of(module)
    return found


#: A block's `_sharding`, fixed when the engine is built: found once, not once a read (a
#: walk of the block's modules, which a dataset's pattern reads twice a prompt).
_SHARDINGS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _sharding_of(module: torch.nn.Module) -> tuple[int, int, int]:
    from vllm.model_executor.layers.linear import ColumnParallelLinear, QKVParallelLinear

    projections = [m for m in module.modules() if isinstance(m, ColumnParallelLinear)]
    if not projections:
        return 0, 1, 1
    fused = next((m for m in projections if isinstance(m, QKVParallelLinear)), None)
    first = fused or projections[0]
    replicas = getattr(fused, "num_kv_head_replicas", 1) if fused is not None else 1
    return first.tp_rank, first.tp_size, replicas


def _whole_heads(attention, local: torch.Tensor, kv: bool) -> torch.Tensor:
    """This worker's heads ``[tokens, local_heads, size]`` -> every head, model order."""
    rank, workers, replicas = _sharding(attention)
    if workers == 1:
        return local
    from vllm.distributed import tensor_model_parallel_all_gather

    gathered = tensor_model_parallel_all_gather(local.contiguous(), dim=1)
    if kv and replicas > 1:
        # Consecutive ranks hold the same kv head: keep one copy of each.
        gathered = gathered.unflatten(1, (workers, -1))[:, ::replicas].flatten(1, 2)
    return gathered


def _own_heads(attention, whole: torch.Tensor, kv: bool) -> torch.Tensor:
    """Every head ``[tokens, heads, size]`` -> this worker's share, as its kernel holds it."""
    rank, workers, replicas = _sharding(attention)
    if workers == 1:
        return whole
    replicas = replicas if kv else 1
    local = whole.shape[1] * replicas // workers
    start = (rank // replicas) * local
    return whole[:, start : start + local]


def _heads(attention, flat: torch.Tensor, which: str) -> torch.Tensor:
    """One of q/k/v (``which``) as every head, ``[tokens, heads, head_dim]``."""
    heads, size = _geometry(_kernel(attention), which)
    return _whole_heads(attention, flat.reshape(-1, heads, size), kv=which != "query")


def _split_heads(which: str):
    """Read one of q/k/v as ``[1, heads, tokens, head_dim]``."""

    def read(attention, raw):
        flat = _qkv(attention, raw).arguments[which]
        return _heads(attention, flat, which).transpose(0, 1).unsqueeze(0).clone()

    def write(attention, raw, value):
        bound = _qkv(attention, raw)
        flat = bound.arguments[which]
        own = _own_heads(attention, value[0].transpose(0, 1), kv=which != "query")
        bound.arguments[which] = matching(own.reshape(flat.shape), flat).contiguous()
        return (bound.args[1:], bound.kwargs)

    return read, write


def _head_outputs(attention, raw):
    kernel = _kernel(attention)
    size = getattr(kernel, "head_size_v", kernel.head_size)
    local = raw.reshape(-1, kernel.num_heads, size)
    return _whole_heads(attention, local, kv=False).unsqueeze(0).clone()


def _head_outputs_back(attention, raw, value):
    own = _own_heads(attention, value[0], kv=False)
    return matching(own.reshape(raw.shape), raw).contiguous()


def recompute_scores(
    query: torch.Tensor,
    key: torch.Tensor,
    scale: float,
    softcap: float | None = None,
    alibi_slopes: torch.Tensor | None = None,
    sliding_window: int | None = None,
    rows: tuple[int, int] | None = None,
) -> torch.Tensor:
    """Masked attention scores ``[heads, query, key]`` of one prefill.

    ``query`` is ``[tokens, heads, head_dim]``, ``key`` ``[tokens, kv_heads, head_dim]``
    (grouped kv heads are repeated). Masked entries are ``-inf``. ``rows=(start, stop)``:
    only those queries' rows, ``[heads, stop - start, tokens]`` (a long prompt's pattern is
    computed a block of rows at a time).
    """
    start, stop = rows if rows is not None else (0, query.shape[0])
    query = query[start:stop]
    (count, heads, size), kv_heads = query.shape, key.shape[1]
    # Query head h reads kv head h // group: the product runs per kv head over its group
    # of query heads (no repeated copy of the keys). [heads, rows, tokens] is the large
    # tensor (gigabytes at 8k tokens): written once by the product, then changed in
    # place; the scale goes on the query.
    grouped = (query.float() * scale).reshape(count, kv_heads, heads // kv_heads, size)
    grouped = grouped.permute(1, 2, 0, 3).reshape(kv_heads, -1, size)
    scores = torch.bmm(grouped, key.float().permute(1, 2, 0)).view(heads, count, key.shape[0])
    if softcap:
        scores.div_(softcap).tanh_().mul_(softcap)
    tokens = key.shape[0]
    if alibi_slopes is None and not (sliding_window is not None and sliding_window > 0):
        hidden = torch.ones(stop - start, tokens, dtype=torch.bool, device=scores.device).triu_(start + 1)
        return scores.masked_fill_(hidden, float("-inf"))
    position = torch.arange(tokens, device=scores.device)
    distance = position[start:stop, None] - position[None, :]  # query - key
    if alibi_slopes is not None:
        scores.sub_(alibi_slopes.to(scores)[:, None, None] * distance)
    hidden = distance < 0
    if sliding_window is not None and sliding_window > 0:
        hidden = hidden | (distance >= sliding_window)
    return scores.masked_fill_(hidden, float("-inf"))


def _scoring(attention) -> dict:
    """The layer's own scoring: its scale, softcap, ALiBi slopes (every head's) and window."""
    kernel = _kernel(attention)
    impl = kernel.impl
    slopes = getattr(impl, "alibi_slopes", None)
    if slopes is not None:  # one per query head, split like them
        slopes = _whole_heads(attention, slopes.reshape(1, -1, 1), kv=False).flatten()
    return {
        "scale": impl.scale,
        "softcap": getattr(impl, "logits_soft_cap", None) or None,
        "alibi_slopes": slopes,
        "sliding_window": getattr(kernel, "sliding_window", None),
    }


def probability_rows(attention, queries: torch.Tensor, keys: torch.Tensor, start: int, stop: int) -> torch.Tensor:
    """Rows ``start:stop`` of the block's prefill pattern, ``[heads, stop - start, keys]``
    float32, from its ``attention_queries`` and ``attention_keys`` as read (``[1, heads,
    tokens, head_dim]``; the keys may stop early, at ``stop`` or later, since no query
    of these rows sees a later one) and the layer's own scoring: what
    ``attention_probabilities`` holds in those rows, without the whole ``[heads, tokens,
    tokens]`` ever existing. Called inside a trace, on the worker, with the block's envoy."""
    scores = recompute_scores(
        queries[0].transpose(0, 1), keys[0].transpose(0, 1), rows=(start, stop), **_scoring(attention)
    )
    return torch.softmax(scores, dim=-1)


def _scores(attention, raw):
    arguments = _qkv(attention, raw).arguments
    return recompute_scores(
        _heads(attention, arguments["query"], "query"),
        _heads(attention, arguments["key"], "key"),
        **_scoring(attention),
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

    attention_output = StandardValue("attention_output", contribution_site, tensor_out, tensor_out_back)
    attention_queries = StandardValue("attention_queries", _kernel_in, *_queries)
    attention_keys = StandardValue("attention_keys", _kernel_in, *_keys)
    attention_values = StandardValue("attention_values", _kernel_in, *_values)
    attention_head_outputs = StandardValue("attention_head_outputs", _kernel_out, _head_outputs, _head_outputs_back)
    attention_scores = PrefillValue(
        "attention_scores",
        _kernel_in,
        _scores,
        read_only="attention_scores is derived and read-only",
    )
    attention_probabilities = PrefillValue(
        "attention_probabilities",
        _kernel_in,
        _probabilities,
        read_only="attention_probabilities is derived and read-only",
    )

    ON_DECODE = {name: DECODE for name, value in list(vars().items()) if isinstance(value, PrefillValue)}
