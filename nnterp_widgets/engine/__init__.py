"""The engine layer: `StandardizedVLLM` on a real vLLM engine, CPU or GPU."""

from ..components import module_of

__all__ = ["module_of"]
