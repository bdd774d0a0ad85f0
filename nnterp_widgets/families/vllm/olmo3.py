"""OLMo-3: OLMo-2's block with alternating sliding-window and full attention."""

from dataclasses import replace

from .tiny import LLAMA_SHAPE, SLIDING_THEN_FULL, WINDOW, TinySpec
from .olmo2 import FAMILY as OLMO2

FAMILY = replace(
    OLMO2,
    model_type="olmo3",
    notes=OLMO2.notes + "; sliding-window layers' patterns use the kernel's window",
    checkpoint=TinySpec(
        "olmo3",
        dict(LLAMA_SHAPE, sliding_window=WINDOW, layer_types=SLIDING_THEN_FULL, tie_word_embeddings=False),
    ),
)
