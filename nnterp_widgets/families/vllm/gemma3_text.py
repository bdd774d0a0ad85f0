"""Gemma-3 (text): Gemma-2's post-norm block plus per-head q/k norms, sliding and full layers."""

from .tiny import LLAMA_SHAPE, SLIDING_THEN_FULL, WINDOW, TinySpec
from ...components.vllm.post_norm import PostNormAttention, PostNormMLP
from .base import AVX2, H200, Family
from .gemma import SCALED_EMBEDDING
from .testing import POST_NORM_NAMES

FAMILY = Family(
    "gemma3_text",
    verified_on=(AVX2, H200),
    attention_cls=PostNormAttention,
    mlp_cls=PostNormMLP,
    vllm_class="Gemma3ForCausalLM",
    notes=(
        "post-norm as gemma2 (contributions read at the post-norms); queries and keys after "
        "q_norm/k_norm and rotary; sliding-window layers' patterns use the kernel's window; " + SCALED_EMBEDDING
    ),
    checkpoint=TinySpec(
        "gemma3_text",
        dict(
            LLAMA_SHAPE,
            head_dim=32,
            query_pre_attn_scalar=32,
            sliding_window=WINDOW,
            layer_types=SLIDING_THEN_FULL,
            tie_word_embeddings=True,
        ),
    ),
    reference=POST_NORM_NAMES,
)
