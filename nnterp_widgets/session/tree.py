"""The module tree the ModuleTree widget shows: plain dicts, from the engine's description.

Standard names come first (``layers[3].mlp``), each module lists the standard values
it serves with availability and reason and, given a prompt's token count, each value's
shape (from the description: no engine request).
"""

from __future__ import annotations

from typing import Any


def _value_entry(value: Any) -> dict:
    return {
        "id": value.id,
        "name": value.name,
        "available": value.available,
        "reason": value.reason,
        "shape": list(value.shape) if value.shape is not None else None,
        "dtype": None,  # known once the value is previewed
        "writable": value.writable,
    }


def build_tree(model: Any, tokens: int | None = None, step: int | None = None) -> list[dict]:
    """The tree of ``model`` (a `StandardizedVLLM`), one root node; shapes for ``tokens``;
    availability on generation step ``step`` when given (the engine's reasons)."""
    modules = model.describe_modules(tokens, step)
    layers_path = model.layers.path
    count = model.num_layers
    nodes: dict[str, dict] = {}
    for module in modules:
        repeat = None
        if module.parent == layers_path and module.layer is not None:
            repeat = {"group": layers_path, "index": module.layer, "count": count}
        node = {
            "id": module.path,
            "name": module.standard or module.native,
            "native": module.native,
            "type": module.type,
            "standard": module.standard is not None,
            "repeat": repeat,
            "values": [_value_entry(value) for value in module.values],
            "children": [],
        }
        nodes[module.path] = node
        if module.parent is not None:
            nodes[module.parent]["children"].append(node)
    root = nodes[modules[0].path]
    root["tensor_parallel_size"] = model.tensor_parallel_size
    return [root]
