"""OLMo-2: on vLLM's Transformers backend; post-norm blocks, gated SiLU MLP, q/k norms."""

from .tiny import LLAMA_SHAPE, TinySpec
from ...components.vllm.post_norm import PostNormAttention, PostNormMLP
from .base import on_transformers_backend
from .testing import POST_NORM_NAMES

#: What the Transformers backend does to OLMo-2's block, for the docs.
OLMO_NOTES = (
    "no vLLM implementation: transformers' decoder layer on vLLM's Transformers backend "
    "(values keep its batch axis); post-norm: attention_output and mlp_output are "
    "post_attention_layernorm's and post_feedforward_layernorm's outputs; q_norm/k_norm "
    "over all heads before rotary; the backend fuses gate and up into gate_up_proj with "
    "SiluAndMul, so mlp_activation is as on a native gated MLP"
)

FAMILY = on_transformers_backend(
    "olmo2",
    attention_cls=PostNormAttention,
    mlp_cls=PostNormMLP,
    head_bias=True,
    notes=OLMO_NOTES,
    checkpoint=TinySpec("olmo2", dict(LLAMA_SHAPE, tie_word_embeddings=False)),
    reference=POST_NORM_NAMES,
)
