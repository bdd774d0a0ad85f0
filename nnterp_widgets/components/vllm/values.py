"""`StandardValue`: one of nnterp's standard values, read at a location of vLLM's tree.

Every value is a private copy: a saved tensor stays what it was when read. An
in-place edit of that copy still reaches the model, because the copy's version
counter is compared at write-back (nnsight's eproperty ``transform``) and, if it
moved, the edited copy is mapped back into the location's own layout. Assignment
maps the new value the same way, after checking it keeps the value's shape.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch
from nnsight.intervention.eproperty import eproperty
from nnsight.intervention.interleaver import Mediator

from ...errors import Unavailable

Site = Callable[[Any], str]
Read = Callable[[Any, Any], Any]
Write = Callable[[Any, Any, Any], Any]


def _shape(value: Any) -> Optional[tuple]:
    return tuple(value.shape) if isinstance(value, torch.Tensor) else None


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
            value._nnterp_version = value._version
        return value

    def _write_back(self, obj: Any, view: Any, raw: Any) -> Any:
        if not isinstance(view, torch.Tensor) or view._version == getattr(view, "_nnterp_version", -1):
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
        return super().__get__(obj, owner)

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


def unavailable(name: str, reason: str) -> property:
    """A value this engine never serves: reading or writing raises `Unavailable`."""

    def fail(self, *args):
        raise Unavailable(self.path, name, reason)

    return property(fail, fail, doc=f"{name}: not available ({reason})")


# Small layout helpers shared by the components.

def batched(tensor: torch.Tensor, features: int = 1) -> torch.Tensor:
    """A location's tokens as a private ``[1, tokens, *features]`` copy.

    ``features`` is how many trailing axes are per token (1 for a stream, 0 for ids).
    The tensor is either vLLM's flat ``[tokens, *features]`` slab (a model vLLM
    implements itself) or the ``[1, tokens, *features]`` batch of one that vLLM's
    Transformers backend runs its modules on; both read the same way.
    """
    tail = tensor.shape[tensor.dim() - features:] if features else ()
    return tensor.clone().reshape(1, -1, *tail)


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
