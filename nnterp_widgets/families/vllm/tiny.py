"""What a tiny checkpoint is (`TinySpec`), and the shapes the families' checkpoints share.

Here, beside the families, because each family's file declares its tiny checkpoint from
these (`Family.checkpoint`); `nnterp_widgets.checkpoints` builds them.

Each family declares its own tiny checkpoint (`Family.checkpoint`, in
``families/vllm/<model_type>.py``) from these shapes, keeping its family's own
features where it has them (softcaps, sliding windows, parallel blocks, ALiBi,
experts, MLA), sized down. Head size is 32 throughout: vLLM's CPU attention backend
serves only some head sizes (32, 64, 80, ...), and 32 keeps the models tiny.
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
    #: Steps of a short seeded training on the corpus (0: the init as it is), so that
    #: the demo's lens and patterns say something ("The Eiffel Tower is in" -> " Paris").
    train_steps: int = 0


#: The size the tiny checkpoints share, in the transformers config's usual names: hidden
#: 128, an MLP of 256, 2 layers, 4 heads of 32, positions up to 1,024.
TINY_SHAPE = dict(
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=4,
    max_position_embeddings=1024,
)

#: A gated-MLP decoder in the Llama shape: `TINY_SHAPE` with 2 kv heads, positions up to 2,048.
LLAMA_SHAPE = dict(TINY_SHAPE, num_key_value_heads=2, max_position_embeddings=2048)

#: Sliding windows this small bite on a prompt of a few tokens.
WINDOW = 4
#: Two layers, one of each kind, where a family alternates sliding and full attention.
SLIDING_THEN_FULL = ["sliding_attention", "full_attention"]
#: Mixture-of-experts sizes: 4 experts, 2 per token, each with a small MLP.
MOE = dict(num_experts_per_tok=2)
EXPERT_SIZE = 64
