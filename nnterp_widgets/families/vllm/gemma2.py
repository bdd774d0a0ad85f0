"""Gemma-2: post-norm blocks, attention and final logit softcaps, alternating sliding windows.

The block adds ``post_attention_layernorm(attn)`` and ``post_feedforward_layernorm(mlp)``
to the stream, so those norms' outputs are the contributions
(`components.vllm.post_norm`). vLLM's Gemma-2 has no ``lm_head``: its logits processor
projects with the embedding, which is therefore both ``embed_tokens`` and ``lm_head``.
"""

from .tiny import LLAMA_SHAPE, SLIDING_THEN_FULL, WINDOW, TinySpec
from ...components.vllm.post_norm import PostNormAttention, PostNormMLP
from .base import AVX2, Family, H200
from .gemma import SCALED_EMBEDDING
from .testing import POST_NORM_NAMES

#: Gemma-2's tiny shape, which Gemma-3 keeps: heads of 32 (queries scaled by 1/sqrt(32)),
#: a sliding-window layer then a full one, the head tied to the embedding.
GEMMA2_SHAPE = dict(
    LLAMA_SHAPE,
    head_dim=32,
    query_pre_attn_scalar=32,
    sliding_window=WINDOW,
    layer_types=SLIDING_THEN_FULL,
    tie_word_embeddings=True,
)

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
        "use the kernel's window; the head is the embedding (lm_head is embed_tokens); " + SCALED_EMBEDDING
    ),
    verified_on=(AVX2, H200),
    checkpoint=TinySpec(
        "gemma2",
        dict(GEMMA2_SHAPE, attn_logit_softcapping=50.0, final_logit_softcapping=30.0),
    ),
    reference=POST_NORM_NAMES,
)
