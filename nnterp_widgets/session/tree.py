"""The module tree the ModuleTree widget shows: plain dicts, built from the envoy tree.

Standard names come first (``layers[3].mlp``), each module lists the standard values
it serves with availability and reason, and, once a prompt has run, each value's
shape and dtype for it. Nothing here runs the engine.
"""

from __future__ import annotations

from typing import Any

from ..components.vllm.attention import ATTENTION_VALUES
from ..components.vllm.layer import LAYER_VALUES
from ..components.vllm.mlp import MLP_VALUES
from ..engine.standardized import ROOT_VALUES
from .panels import PromptResult


def _value_entry(host: Any, name: str, result: PromptResult | None) -> dict:
    reason = host.unavailable_reason(name)
    descriptor = getattr(type(host), name, None)
    writable = reason is None and getattr(descriptor, "_write", None) is not None
    value_id = f"{host.path}.{name}"
    summary = result.values.get(value_id) if result is not None else None
    return {
        "id": value_id,
        "name": name,
        "available": reason is None,
        "reason": reason,
        "shape": list(summary.shape) if summary is not None else None,
        "dtype": summary.dtype if summary is not None else None,
        "writable": writable,
    }


def build_tree(model: Any, result: PromptResult | None = None) -> list[dict]:
    """The tree of ``model`` (a `StandardizedVLLM`), one root node."""
    standard: dict[str, tuple[str, tuple[str, ...]]] = {}
    layers = model.layers
    count = len(list(layers))
    standard[layers.path] = ("layers", ())
    for index, layer in enumerate(layers):
        standard[layer.path] = (f"layers[{index}]", LAYER_VALUES)
        standard[layer.self_attn.path] = (f"layers[{index}].self_attn", ATTENTION_VALUES)
        standard[layer.mlp.path] = (f"layers[{index}].mlp", MLP_VALUES)
    for name in ("embed_tokens", "norm", "lm_head"):
        envoy = getattr(model, name, None)
        if envoy is not None:
            # A tied head is the embedding's own envoy (Gemma-2): keep the first name.
            standard.setdefault(envoy.path, (name, ()))

    def node(envoy: Any, native: str, repeat: dict | None) -> dict:
        name, values = standard.get(envoy.path, (None, ()))
        children = []
        named = envoy._named_children()
        for child_name, child in named:
            if child.path != f"{envoy.path}.{child_name}":
                continue  # a second path to a module listed elsewhere (tied weights)
            child_repeat = None
            if envoy.path == layers.path:
                child_repeat = {"group": layers.path, "index": int(child_name), "count": count}
            children.append(node(child, child_name, child_repeat))
        return {
            "id": envoy.path,
            "name": name or native,
            "native": native,
            "type": type(envoy._module).__name__,
            "standard": name is not None,
            "repeat": repeat,
            "values": [_value_entry(envoy, value, result) for value in values],
            "children": children,
        }

    root = node(model, "model", None)
    root["name"] = "model"
    root["standard"] = True
    root["values"] = [_value_entry(model, name, result) for name in ROOT_VALUES]
    root["tensor_parallel_size"] = model.tensor_parallel_size
    return [root]
