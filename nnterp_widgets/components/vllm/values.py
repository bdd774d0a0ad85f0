"""`StandardValue`: one of nnterp's standard values, read at a location of vLLM's tree.

Every value is a private copy: a saved tensor stays what it was when read. An
in-place edit of that copy still reaches the model, because the copy's version
counter is compared at write-back (nnsight's eproperty ``transform``) and, if it
moved, the edited copy is mapped back into the location's own layout. Assignment
maps the new value the same way, after checking it keeps the value's shape.

A write-back costs even when nothing was edited (the batch's whole slab is spliced
back), so an envoy marked `READS_ONLY` (the engine's `reader`) serves its values with
none: what a request only reads, it reads through the reader.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

import torch
from nnsight.intervention.eproperty import eproperty
from nnsight.intervention.interleaver import Mediator

from ...errors import Unavailable

Site = Callable[[Any], str]
Read = Callable[[Any, Any], Any]
Write = Callable[[Any, Any, Any], Any]


def _shape(value: Any) -> Optional[tuple]:
    return tuple(value.shape) if isinstance(value, torch.Tensor) else None


Sizes = Mapping[str, Optional[int]]

#: The attribute that marks an envoy as read only: its values bind no write-back.
READS_ONLY = "_nnterp_reads_only"


@dataclass(frozen=True)
class ValueFacts:
    """What is true of a standard value whatever the family: where it comes in a forward
    pass, which axis holds the tokens, and its shape for a prompt of ``tokens`` tokens."""

    #: Execution order: root values below `LAYER_ORDER_START` come before the blocks, those
    #: from `LAYER_ORDER_END` after them; a block's values between, in the order they run
    #: (a trace must read them in this order).
    order: int
    #: The axis holding token positions (``None``: no such axis).
    token_axis: Optional[int]
    #: ``shape(sizes, tokens)``: the engine's standard sizes (``hidden_size`` ...) -> shape.
    shape_of: Callable[[Sizes, int], tuple]

    def shape(self, sizes: Sizes, tokens: int) -> Optional[tuple]:
        """The value's shape, or ``None`` where a size it needs is unknown."""
        try:
            shape = tuple(self.shape_of(sizes, tokens))
        except (KeyError, TypeError):
            return None
        return shape if all(isinstance(n, int) for n in shape) else None


LAYER_ORDER_START = 10
LAYER_ORDER_END = 30


def _per_token(size: str):
    return lambda sizes, tokens: (1, tokens, sizes[size])


def _per_head(heads: str):
    return lambda sizes, tokens: (1, sizes[heads], tokens, sizes["head_dim"])


#: Every standard value's facts, by name (said once; `StandardValue` and `unavailable`
#: carry them, the engine's description reads them).
FACTS: dict[str, ValueFacts] = {
    "input_ids": ValueFacts(0, 1, lambda sizes, tokens: (1, tokens)),
    "input_size": ValueFacts(1, None, lambda sizes, tokens: (2,)),
    "attention_mask": ValueFacts(2, 1, lambda sizes, tokens: (1, tokens)),
    "token_embeddings": ValueFacts(3, 1, _per_token("hidden_size")),
    "layer_input": ValueFacts(10, 1, _per_token("hidden_size")),
    "attention_queries": ValueFacts(11, 2, _per_head("num_heads")),
    "attention_keys": ValueFacts(12, 2, _per_head("num_kv_heads")),
    "attention_values": ValueFacts(13, 2, _per_head("num_kv_heads")),
    "attention_scores": ValueFacts(14, 2, lambda sizes, tokens: (1, sizes["num_heads"], tokens, tokens)),
    "attention_probabilities": ValueFacts(15, 2, lambda sizes, tokens: (1, sizes["num_heads"], tokens, tokens)),
    "attention_head_outputs": ValueFacts(
        16, 1, lambda sizes, tokens: (1, tokens, sizes["num_heads"], sizes["head_dim"])
    ),
    "attention_output": ValueFacts(17, 1, _per_token("hidden_size")),
    "mlp_neurons": ValueFacts(18, 1, _per_token("intermediate_size")),
    "mlp_activation": ValueFacts(19, 1, _per_token("intermediate_size")),
    "mlp_output": ValueFacts(20, 1, _per_token("hidden_size")),
    "layer_output": ValueFacts(21, 1, _per_token("hidden_size")),
    # vLLM computes the logits of the last position only.
    "logits": ValueFacts(30, 1, lambda sizes, tokens: (1, 1, sizes["vocab_size"])),
    "next_token_probs": ValueFacts(31, None, lambda sizes, tokens: (1, sizes["vocab_size"])),
    "lm_head_output": ValueFacts(32, 1, _per_token("vocab_size")),
}


class StandardValue(eproperty):
    """A standard value on an envoy.

    Args:
        name: The standard name (``layer_output``); also the key ``support()`` lists.
        site: Maps the host envoy to the nnsight location the value is read at
            (``"model.model.layers.0.output"``).
        read: ``read(envoy, raw) -> value``: builds the standard value, a new tensor,
            from what the location serves.
        write: ``write(envoy, raw, value) -> raw``: maps a standard value back into
            the location's layout. ``None`` makes the value read-only.
        read_only: The AttributeError message an assignment raises when ``write``
            is ``None``.
    """

    def __init__(
        self,
        name: str,
        site: Site,
        read: Read,
        write: Optional[Write] = None,
        read_only: Optional[str] = None,
        description: str = "",
    ) -> None:
        super().__init__(key=name, description=description or name)
        self.name = name
        self._site = site
        self._read = read
        self._write = write
        self._read_only = read_only or f"{name} is read-only on this engine"
        self._preprocess = self._private
        if write is not None:
            self._transform = self._write_back

    @property
    def facts(self) -> ValueFacts:
        return FACTS[self.name]

    @property
    def writable(self) -> bool:
        """Whether the value can be assigned or edited in place (where it is served)."""
        return self._write is not None

    # The location is the host's own sub-module's, not "{host.path}.{name}".
    def _location(self, obj: Any) -> str:
        return self._site(obj)

    def _private(self, obj: Any, raw: Any) -> Any:
        # Built outside inference mode: vLLM's forward runs under it, and inference
        # tensors keep no version counter, which is what tells an edited copy.
        with torch.inference_mode(False):
            value = self._read(obj, raw)
        if isinstance(value, torch.Tensor):
            # The copy's version now: a write-back whose copy has not moved is a no-op.
            value._nnterp_version = value._version  # noqa: SLF001 - torch's version counter, read-only
        return value

    def _write_back(self, obj: Any, view: Any, raw: Any) -> Any:
        if not isinstance(view, torch.Tensor) or view._version == getattr(view, "_nnterp_version", -1):  # noqa: SLF001
            return raw
        return self._write(obj, raw, view)

    def _check(self, obj: Any) -> None:
        reason = obj.unavailable_reason(self.name)
        if reason is not None:
            raise Unavailable(obj.path, self.name, reason)

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        self._check(obj)
        if obj.__dict__.get(READS_ONLY):
            return self._private(obj, Mediator.value(self._location(obj)))
        return super().__get__(obj, owner)

    def edit_in_place(self, obj: Any, edit: Callable[[torch.Tensor], Any]) -> torch.Tensor:
        """``edit(value)`` changes this value (a private copy) in place; the change lands
        in the run's own tensors in place, where the request's span of them lies. Returns
        the edited copy (what a later read of the value would see).

        An assignment or a write-back hands nnsight a new value, which it splices into a
        new copy of the step's whole slab: each of a step's requests that writes then
        costs the step's tokens, not its own (and all the copies are alive until the
        module returns: a step of a thousand small requests that each write holds a
        thousand slabs). Here the value's own layout is computed (``write``) and copied
        over the request's views of the slab. Inside a request only."""
        self._check(obj)
        if self._write is None:
            raise AttributeError(self._read_only)
        raw = Mediator.value(self._location(obj))
        with torch.inference_mode(False):
            value = self._read(obj, raw)
        edit(value)
        with torch.inference_mode():
            _copy_over(raw, self._write(obj, raw, value))
        return value

    def __set__(self, obj: Any, value: Any) -> None:
        self._check(obj)
        if self._write is None:
            raise AttributeError(self._read_only)
        location = self._location(obj)
        raw = Mediator.value(location)
        expected = _shape(self._read(obj, raw))
        got = _shape(value) if isinstance(value, torch.Tensor) else None
        if got != expected:
            raise ValueError(
                f"{obj.path}.{self.name} must keep its shape {list(expected or ())}; "
                f"got {list(got) if got is not None else type(value).__name__}"
            )
        Mediator.swap(location, self._write(obj, raw, value))


class Unserved(property):
    """A value this engine never serves (see `unavailable`); it still has its facts."""

    def __init__(self, name: str, reason: str) -> None:
        def fail(envoy, *args):
            raise Unavailable(envoy.path, name, reason)

        super().__init__(fail, fail, doc=f"{name}: not available ({reason})")
        self.name = name
        self.reason = reason

    facts = StandardValue.facts
    writable = False


def _copy_over(raw: Any, new: Any) -> None:
    """Copy ``new`` (a location's layout, as ``write`` builds it) over ``raw`` (the run's
    tensors), part by part; a part ``write`` kept is left alone."""
    if isinstance(raw, torch.Tensor):
        if new is not raw:
            raw.copy_(new)
    elif isinstance(raw, (tuple, list)):
        for old, part in zip(raw, new, strict=True):
            _copy_over(old, part)
    elif isinstance(raw, dict):
        for key, old in raw.items():
            _copy_over(old, new[key])


def edit_in_place(envoy: Any, name: str, edit: Callable[[torch.Tensor], Any]) -> torch.Tensor:
    """`StandardValue.edit_in_place` of the value ``name`` of ``envoy``: the edited copy."""
    return getattr(type(envoy), name).edit_in_place(envoy, edit)


def unavailable(name: str, reason: str) -> property:
    """A value this engine never serves: reading or writing raises `Unavailable`."""
    return Unserved(name, reason)


# Small layout helpers shared by the components.


def batched(tensor: torch.Tensor, features: int = 1, *, fresh: bool = False) -> torch.Tensor:
    """A location's tokens as a private ``[1, tokens, *features]`` copy.

    ``features`` is how many trailing axes are per token (1 for a stream, 0 for ids).
    The tensor is either vLLM's flat ``[tokens, *features]`` slab (a model vLLM
    implements itself) or the ``[1, tokens, *features]`` batch of one that vLLM's
    Transformers backend runs its modules on; both read the same way. ``fresh``: the
    tensor was made for this read (a sum of the location's parts) and is private
    already, so it is not copied again (a kernel and an allocation a read: a batch
    reads every layer of every prompt).
    """
    tail = tensor.shape[tensor.dim() - features :] if features else ()
    return (tensor if fresh else tensor.clone()).reshape(1, -1, *tail)


def summed(part: torch.Tensor, other: torch.Tensor | None, features: int = 1) -> torch.Tensor:
    """`batched` of ``part + other``, or of ``part`` alone where ``other`` is None (a
    residual or a bias that a location keeps apart)."""
    return batched(part, features) if other is None else batched(part + other, features, fresh=True)


def matching(value: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``value`` on ``like``'s device and in its dtype.

    What a user writes or steers in may come from either device (a CPU tensor into a
    CUDA engine) and in any float dtype (a float64 vector into a float32 stream); the
    engine's kernels take neither, so every write path maps it here first.
    """
    return value.to(device=like.device, dtype=like.dtype)


def unbatched(value: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A ``[1, tokens, ...]`` value back in the slab's layout, dtype and device."""
    return matching(value.reshape(like.shape), like).contiguous()


def first_arg(raw: Any) -> Any:
    """The first positional input of an ``(args, kwargs)`` location."""
    args, kwargs = raw
    if args:
        return args[0]
    return next(iter(kwargs.values()))


def with_first_arg(raw: Any, value: Any) -> Any:
    args, kwargs = raw
    if args:
        return ((value, *args[1:]), kwargs)
    key = next(iter(kwargs))
    return (args, {**kwargs, key: value})
