"""What each tiny checkpoint is: a transformers config, small enough for a CPU test.

Head size is 32 throughout: vLLM's CPU attention backend serves only some head
sizes (32, 64, 80, ...), and 32 keeps the models tiny.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TinySpec:
    """A tiny checkpoint: ``model_type`` plus the config fields that make it small."""

    model_type: str
    config: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    #: Standard deviation of the seeded init; larger than transformers' 0.02 so
    #: that the streams and patterns of an untrained model are not all flat.
    init_std: float = 0.2


# A gated-MLP decoder in the Llama shape: 2 layers, 4 heads of 32, 2 kv heads.
_LLAMA_SHAPE = dict(
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=1024,
)

SPECS: dict[str, TinySpec] = {
    "qwen2": TinySpec("qwen2", dict(_LLAMA_SHAPE, tie_word_embeddings=True)),
    "llama": TinySpec("llama", dict(_LLAMA_SHAPE, tie_word_embeddings=False)),
    "gpt2": TinySpec(
        "gpt2", dict(n_embd=128, n_layer=2, n_head=4, n_positions=1024, n_inner=256)
    ),
}

#: The checkpoint the demo and most tests use.
DEFAULT = "qwen2"
