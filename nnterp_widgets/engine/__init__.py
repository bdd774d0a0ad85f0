"""The engine layer: `StandardizedVLLM` on a real vLLM engine, CPU or GPU."""

from ..components import module_of
from ..components.vllm.values import edit_in_place
from ..components.vllm.attention import probability_rows
from .parcels import parcel
from .steps import steps

__all__ = ["edit_in_place", "module_of", "parcel", "probability_rows", "steps"]
