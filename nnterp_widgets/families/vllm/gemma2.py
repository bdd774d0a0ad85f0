"""Gemma-2: post-norm blocks, attention and final logit softcaps, alternating sliding windows.

The block adds ``post_attention_layernorm(attn)`` and ``post_feedforward_layernorm(mlp)``
to the stream, so those norms' outputs are the contributions. vLLM's Gemma-2 has no
``lm_head``: its logits processor projects with the embedding, which is therefore
both ``embed_tokens`` and ``lm_head``.
"""

from ...components.vllm.attention import Attention
from ...components.vllm.mlp import GatedMLP
from .base import Family
from .gemma import SCALED_EMBEDDING


class PostNormAttention(Attention):
    """Attention whose contribution is its post-norm's output."""

    CONTRIBUTION = "post_attention_layernorm"


class PostNormMLP(GatedMLP):
    """A gated MLP whose contribution is its post-norm's output."""

    CONTRIBUTION = "post_feedforward_layernorm"


FAMILY = Family(
    "gemma2",
    attention_cls=PostNormAttention,
    mlp_cls=PostNormMLP,
    lm_head="model.embed_tokens",
    vllm_class="Gemma2ForCausalLM",
    notes=(
        "post-norm: attention_output and mlp_output are post_attention_layernorm's and "
        "post_feedforward_layernorm's outputs; the attention softcap is the kernel's "
        "logits_soft_cap (the pattern applies it), the final softcap is the logits "
        "processor's (logits and project_on_vocab apply it); sliding-window layers' patterns "
        "use the kernel's window; the head is the embedding (lm_head is embed_tokens); "
        + SCALED_EMBEDDING
    ),
)
