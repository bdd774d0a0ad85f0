"""The families of vLLM implementations the standardized engine knows, one per file."""

from __future__ import annotations

import importlib

from .base import Family

#: model_type -> module under this package that declares ``FAMILY``.
KNOWN = (
    # Fused (hidden, residual) pairs, gated MLPs.
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "gemma",
    "gemma2",
    "gemma3_text",
    "phi3",
    # Plain streams.
    "gpt2",
    "gptj",
    "falcon",
    "bloom",
    "mpt",
    # vLLM's Transformers backend.
    "gpt_neox",
    "phi",
    "olmo2",
    "olmo3",
    # Mixtures of experts.
    "mixtral",
    "qwen2_moe",
    "qwen3_moe",
    "olmoe",
    # Latent attention.
    "deepseek_v2",
    "deepseek_v3",
)


class UnknownFamily(ValueError):
    """A checkpoint whose ``model_type`` no family module declares."""


def family_for(model_type: str) -> Family:
    """The `Family` for a transformers ``model_type``; a clear error for an unknown one."""
    if model_type not in KNOWN:
        raise UnknownFamily(
            f"no vLLM family for model_type {model_type!r}; the known families are: "
            f"{', '.join(sorted(KNOWN))}"
        )
    return importlib.import_module(f"{__name__}.{model_type}").FAMILY


def families() -> dict[str, Family]:
    return {name: family_for(name) for name in KNOWN}


__all__ = ["Family", "KNOWN", "UnknownFamily", "families", "family_for"]
