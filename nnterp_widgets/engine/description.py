"""The engine described in plain objects: its standard values and its modules.

Everything a layer above needs to know about what the engine serves (availability and
reason, whether a value is writable, its order in a forward pass, which axis holds the
tokens, its shape for a prompt of so many tokens) and how its modules nest, read from
the values' own facts (`components.vllm.values.FACTS`) and the envoy tree, so no
caller reads a descriptor's or nnsight's private attributes. Nothing here runs the
engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..components import module_of
from ..components.vllm.attention import ATTENTION_VALUES
from ..components.vllm.layer import LAYER_VALUES
from ..components.vllm.mlp import MLP_VALUES
from ..components.vllm.values import FACTS, LAYER_ORDER_END, LAYER_ORDER_START

#: A block's parts that hold standard values: (attribute on the block, value names).
BLOCK_PARTS = (("", LAYER_VALUES), ("self_attn", ATTENTION_VALUES), ("mlp", MLP_VALUES))


@dataclass(frozen=True)
class ValueDescription:
    """One standard value of one module of this engine."""

    #: ``"model.model.layers.0.mlp.mlp_output"``: the host module's path, then the name.
    id: str
    #: The host envoy's path (``"model.model.layers.0.mlp"``; ``"model"`` for the root).
    path: str
    #: ``None`` for a root value, else the block's index.
    layer: Optional[int]
    #: Where the value lives in its block: ``""`` (the block), ``"self_attn"``, ``"mlp"``.
    part: str
    name: str
    order: int
    token_axis: Optional[int]
    writable: bool
    #: ``None`` when served, else why not.
    reason: Optional[str]
    #: For the prompt length the description was asked for (``None``: not asked, or unknown).
    shape: Optional[tuple]

    @property
    def available(self) -> bool:
        return self.reason is None

    @property
    def standard_path(self) -> str:
        """``layers[0].mlp.mlp_output``; ``logits`` for a root value."""
        if self.layer is None:
            return self.name
        return ".".join(filter(None, (f"layers[{self.layer}]", self.part, self.name)))

    def host(self, model: Any) -> Any:
        """The envoy this value is read on (in a trace, on the engine's side too)."""
        if self.layer is None:
            return model
        block = model.layers[self.layer]
        return getattr(block, self.part) if self.part else block


@dataclass(frozen=True)
class ModuleDescription:
    """One module of the engine's tree, parents before children, children in order."""

    path: str
    #: ``None`` for the root.
    parent: Optional[str]
    #: The attribute name under its parent (``"mlp"``, ``"0"``).
    native: str
    #: The module's class name (``"Qwen2MLP"``).
    type: str
    #: The standard name (``"layers[0].mlp"``), ``None`` for a module without one.
    standard: Optional[str]
    #: The block's index for a decoder block, else ``None``.
    layer: Optional[int]
    #: The standard values this module serves or lists, in execution order.
    values: tuple[ValueDescription, ...] = ()


def _value(
    host: Any, name: str, layer: Optional[int], part: str, sizes: dict, tokens: Optional[int], step: Optional[int]
) -> ValueDescription:
    facts = FACTS[name]
    reason = host.unavailable_reason(name, step)
    descriptor = getattr(type(host), name, None)
    writable = reason is None and bool(getattr(descriptor, "writable", False))
    return ValueDescription(
        id=f"{host.path}.{name}",
        path=host.path,
        layer=layer,
        part=part,
        name=name,
        order=facts.order,
        token_axis=facts.token_axis,
        writable=writable,
        reason=reason,
        shape=facts.shape(sizes, tokens) if tokens is not None and reason is None else None,
    )


def describe_values(
    model: Any, root_values: tuple[str, ...], tokens: Optional[int] = None, step: Optional[int] = None
) -> tuple[ValueDescription, ...]:
    """Every standard value of ``model`` in execution order (root, block by block, root);
    availability on generation step ``step`` when given (``support(step)``'s rule)."""
    sizes = model.sizes
    root = sorted((_value(model, name, None, "", sizes, tokens, step) for name in root_values), key=lambda v: v.order)
    blocks = []
    for index, block in enumerate(model.layers):
        found = []
        for part, names in BLOCK_PARTS:
            host = getattr(block, part) if part else block
            found.extend(_value(host, name, index, part, sizes, tokens, step) for name in names)
        blocks.extend(sorted(found, key=lambda v: v.order))
    before = [v for v in root if v.order < LAYER_ORDER_START]
    after = [v for v in root if v.order >= LAYER_ORDER_END]
    return (*before, *blocks, *after)


def describe_modules(model: Any, values: tuple[ValueDescription, ...]) -> tuple[ModuleDescription, ...]:
    """The module tree, parents first; each standard module with its values."""
    standard: dict[str, tuple[str, Optional[int]]] = {model.path: ("model", None)}
    layers = model.layers
    standard[layers.path] = ("layers", None)
    for index, block in enumerate(layers):
        standard[block.path] = (f"layers[{index}]", index)
        for part, _ in BLOCK_PARTS[1:]:
            standard[getattr(block, part).path] = (f"layers[{index}].{part}", None)
    for name in ("embed_tokens", "norm", "lm_head"):
        envoy = getattr(model, name, None)
        if envoy is not None:
            # A tied head is the embedding's own envoy (Gemma-2): keep the first name.
            standard.setdefault(envoy.path, (name, None))
    by_host: dict[str, list[ValueDescription]] = {}
    for value in values:
        by_host.setdefault(value.path, []).append(value)

    found = []

    def walk(envoy: Any, native: str, parent: Optional[str]) -> None:
        name, layer = standard.get(envoy.path, (None, None))
        found.append(
            ModuleDescription(
                path=envoy.path,
                parent=parent,
                native=native,
                type=type(module_of(envoy)).__name__,
                standard=name,
                layer=layer,
                values=tuple(by_host.get(envoy.path, ())),
            )
        )
        for child_name, child in envoy._named_children():  # noqa: SLF001 - nnsight lists an envoy's children so
            if child.path != f"{envoy.path}.{child_name}":
                continue  # a second path to a module listed elsewhere (tied weights)
            walk(child, child_name, envoy.path)

    walk(model, "model", None)
    return tuple(found)
