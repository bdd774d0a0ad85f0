"""The families of vLLM implementations the standardized engine knows: this folder.

A family is a module here named for its transformers ``model_type`` that declares
``FAMILY`` (a `Family`); nothing else lists them. Adding one is adding its file
(DEVELOP.md, "Adding a family"), then regenerating docs/families.md.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from .base import Family


class UnknownFamily(ValueError):
    """A checkpoint whose ``model_type`` no family module declares."""


@cache
def known() -> tuple[str, ...]:
    """Every family's ``model_type``, sorted: the modules of this folder that declare ``FAMILY``."""
    names = (info.name for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_"))
    return tuple(sorted(name for name in names if hasattr(_module(name), "FAMILY")))


def _module(name: str):
    return importlib.import_module(f"{__name__}.{name}")


def family_for(model_type: str) -> Family:
    """The `Family` for a transformers ``model_type``; a clear error for an unknown one."""
    if model_type not in known():
        raise UnknownFamily(
            f"no vLLM family for model_type {model_type!r}; the known families are: {', '.join(known())}"
        )
    return _module(model_type).FAMILY


def families() -> dict[str, Family]:
    """``model_type -> Family`` for every family, in `known` order."""
    return {name: family_for(name) for name in known()}


__all__ = ["Family", "UnknownFamily", "families", "family_for", "known"]
