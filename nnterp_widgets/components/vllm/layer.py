"""Decoder blocks: ``layer_input`` and ``layer_output``, the residual stream.

Two conventions, which a family declares by the class it maps its blocks to:

* `FusedLayer`: vLLM's Llama-style block takes and returns a ``(hidden_states,
  residual)`` pair, whose sum is the stream, so the next block's norm can fuse the
  add. Read as the sum; written back as ``(value, 0)`` (``residual`` kept ``None``
  where the engine passed ``None``), which every such block adds back exactly.
* `PlainLayer`: the block takes and returns the stream itself (GPT-2, GPT-NeoX).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import torch
from nnsight.intervention.envoy import Envoy

from .. import module_of
from .values import StandardValue, batched, summed, unbatched

#: The standard names a decoder block serves, in ``support()`` order.
LAYER_VALUES = ("layer_input", "layer_output")


class StandardEnvoy(Envoy):
    """An envoy that serves standard values; subclasses list what they cannot serve."""

    #: Standard name -> reason, for the values this component never serves.
    UNAVAILABLE: dict[str, str] = {}
    #: Standard name -> reason, for the values it serves on the prefill only (a decode
    #: step, generation step 1 on, cannot).
    ON_DECODE: dict[str, str] = {}
    #: A sibling module in the block whose output is this component's contribution to
    #: the stream (a post-norm: Gemma-2's ``post_attention_layernorm``); ``None``: its own.
    CONTRIBUTION: str | None = None

    def unavailable_reason(self, name: str, step: int | None = None) -> str | None:
        """Why ``name`` is not served (``None``: it is). ``step``: a generation step
        (0 the prefill, 1 on decode steps); ``None``, outside any step, as ``support()``."""
        reason = self.UNAVAILABLE.get(name)
        if reason is None and step is not None and step > 0:
            return self.ON_DECODE.get(name)
        return reason


@functools.cache
def _forward_signature(cls: type) -> inspect.Signature:
    # Once a class: a signature costs tens of microseconds, and a dataset's reads ask
    # for one a read.
    return inspect.signature(cls.forward)


def bound_forward(module: torch.nn.Module, args: tuple, kwargs: dict) -> inspect.BoundArguments:
    """``module``'s forward arguments by name: the class's forward, bound with the module
    as ``self`` (the instance's forward is nnsight's wrapper)."""
    return _forward_signature(type(module)).bind(module, *args, **kwargs)


def _bind(module: torch.nn.Module, raw: Any) -> inspect.BoundArguments:
    args, kwargs = raw
    return bound_forward(module, args, kwargs)


def _unbind(bound: inspect.BoundArguments) -> Any:
    return (bound.args[1:], bound.kwargs)


def _stream_in(layer: Envoy, raw: Any) -> torch.Tensor:
    arguments = _bind(module_of(layer), raw).arguments
    hidden, residual = arguments["hidden_states"], arguments.get("residual")
    return summed(hidden, residual)


def _stream_in_back(layer: Envoy, raw: Any, value: torch.Tensor) -> Any:
    bound = _bind(module_of(layer), raw)
    hidden = bound.arguments["hidden_states"]
    bound.arguments["hidden_states"] = unbatched(value, hidden)
    if bound.arguments.get("residual") is not None:
        bound.arguments["residual"] = torch.zeros_like(hidden)
    return _unbind(bound)


def _pair_out(layer: Envoy, raw: Any) -> torch.Tensor:
    hidden, residual = raw[0], raw[1]
    return summed(hidden, residual)


def _pair_out_back(layer: Envoy, raw: Any, value: torch.Tensor) -> Any:
    hidden = raw[0]
    return (unbatched(value, hidden), torch.zeros_like(hidden), *raw[2:])


def _plain_in(layer: Envoy, raw: Any) -> torch.Tensor:
    return batched(_bind(module_of(layer), raw).arguments["hidden_states"])


def _plain_in_back(layer: Envoy, raw: Any, value: torch.Tensor) -> Any:
    bound = _bind(module_of(layer), raw)
    bound.arguments["hidden_states"] = unbatched(value, bound.arguments["hidden_states"])
    return _unbind(bound)


def tensor_out(layer: Envoy, raw: Any) -> torch.Tensor:
    """A module's output (the first of a tuple) as a private ``[1, tokens, ...]`` copy."""
    return batched(raw[0] if isinstance(raw, tuple) else raw)


def tensor_out_back(layer: Envoy, raw: Any, value: torch.Tensor) -> Any:
    """``value`` back in the output's layout (the first of a tuple; the rest kept)."""
    if isinstance(raw, tuple):
        return (unbatched(value, raw[0]), *raw[1:])
    return unbatched(value, raw)


def _summing_workers(envoy: Envoy) -> int:
    """How many workers each hold a partial sum of this component's output: its output
    projection is row-parallel and leaves the sum to the block (Falcon's parallel block
    reduces attention and MLP together, once). 1 where the output is already whole."""
    from vllm.model_executor.layers.linear import RowParallelLinear

    for module in module_of(envoy).children():
        if isinstance(module, RowParallelLinear) and module.tp_size > 1 and not module.reduce_results:
            return module.tp_size
    return 1


def whole_sum(envoy: Envoy, partial: torch.Tensor) -> torch.Tensor:
    """A component's output, summed across the workers that each hold a part of it."""
    if _summing_workers(envoy) == 1:
        return partial
    from vllm.distributed import tensor_model_parallel_all_reduce

    return tensor_model_parallel_all_reduce(partial.clone())


def share_of_sum(envoy: Envoy, whole: torch.Tensor) -> torch.Tensor:
    """This worker's part of a whole output: equal shares, which the block's own
    reduction sums back to ``whole``."""
    return whole / _summing_workers(envoy)


def _input(envoy: Envoy) -> str:
    return f"{envoy.path}.input"


def _output(envoy: Envoy) -> str:
    return f"{envoy.path}.output"


def contribution_site(envoy: Envoy) -> str:
    """Where a block component's contribution to the stream is read."""
    if envoy.CONTRIBUTION is None:
        return f"{envoy.path}.output"
    return f"{envoy.path.rsplit('.', 1)[0]}.{envoy.CONTRIBUTION}.output"


class Layer(StandardEnvoy):
    """A decoder block; its attention and MLP are ``self_attn`` and ``mlp`` (the
    family's ``rename`` aliases them where vLLM spells them otherwise)."""

    #: How the block passes the stream, as the docs name it.
    CONVENTION = ""

    @staticmethod
    def output_of(stream: torch.Tensor) -> Any:  # pragma: no cover - per convention
        raise NotImplementedError

    def skip_with(self, stream: torch.Tensor) -> None:
        """Skip this block, its output being ``stream`` (``[1, tokens, hidden]``)."""
        self.skip(self.output_of(stream.reshape(-1, stream.shape[-1])))


class FusedLayer(Layer):
    """A block passing the stream as ``(hidden_states, residual)``."""

    CONVENTION = "fused pair"

    @staticmethod
    def output_of(stream: torch.Tensor) -> Any:
        """The block's output layout for a flat ``[tokens, hidden]`` stream."""
        return (stream, torch.zeros_like(stream))

    layer_input = StandardValue("layer_input", _input, _stream_in, _stream_in_back)
    layer_output = StandardValue("layer_output", _output, _pair_out, _pair_out_back)


class PlainLayer(Layer):
    """A block passing the stream as one tensor."""

    CONVENTION = "plain stream"

    @staticmethod
    def output_of(stream: torch.Tensor) -> Any:
        return stream

    layer_input = StandardValue("layer_input", _input, _plain_in, _plain_in_back)
    layer_output = StandardValue("layer_output", _output, tensor_out, tensor_out_back)
