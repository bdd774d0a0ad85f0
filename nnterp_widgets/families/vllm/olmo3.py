"""OLMo-3: OLMo-2's block with alternating sliding-window and full attention."""

from .tiny import LLAMA_SHAPE, SLIDING_THEN_FULL, WINDOW, TinySpec
from ...components.vllm.post_norm import PostNormAttention, PostNormMLP
from ...components.vllm.transformers_backend import TransformersLayer
from .base import TRANSFORMERS, Family
from .olmo2 import OLMO_NOTES
from .testing import POST_NORM_NAMES

FAMILY = Family(
    "olmo3",
    layer_cls=TransformersLayer,
    attention_cls=PostNormAttention,
    mlp_cls=PostNormMLP,
    head_bias=True,
    backend=TRANSFORMERS,
    vllm_class="TransformersForCausalLM",
    notes=OLMO_NOTES + "; sliding-window layers' patterns use the kernel's window",
    checkpoint=TinySpec(
        "olmo3",
        dict(LLAMA_SHAPE, sliding_window=WINDOW, layer_types=SLIDING_THEN_FULL, tie_word_embeddings=False),
    ),
    reference=POST_NORM_NAMES,
)
