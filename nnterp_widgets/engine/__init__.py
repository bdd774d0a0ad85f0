"""The engine layer: `StandardizedVLLM` on a real vLLM engine, CPU or GPU."""

from ..components import module_of
from ..components.vllm.attention import probability_rows

__all__ = ["module_of", "probability_rows"]
