"""Gemma-3 (text): Gemma-2's post-norm block plus per-head q/k norms, sliding and full layers."""

from .tiny import TinySpec
from ...components.vllm.post_norm import PostNormAttention, PostNormMLP
from .base import AVX2, H200, Family
from .gemma import SCALED_EMBEDDING
from .gemma2 import GEMMA2_SHAPE
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
    checkpoint=TinySpec("gemma3_text", dict(GEMMA2_SHAPE)),
    reference=POST_NORM_NAMES,
)
