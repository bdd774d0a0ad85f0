"""Gemma-3 (text): Gemma-2's post-norm block plus per-head q/k norms, sliding and full layers."""

from .base import Family
from .gemma import SCALED_EMBEDDING
from .gemma2 import PostNormAttention, PostNormMLP

FAMILY = Family(
    "gemma3_text",
    attention_cls=PostNormAttention,
    mlp_cls=PostNormMLP,
    vllm_class="Gemma3ForCausalLM",
    notes=(
        "post-norm as gemma2 (contributions read at the post-norms); queries and keys after "
        "q_norm/k_norm and rotary; sliding-window layers' patterns use the kernel's window; "
        + SCALED_EMBEDDING
    ),
)
