"""Phi (1, 1.5, 2): on vLLM's Transformers backend; a parallel block, plain GELU MLP, head bias."""

from .tiny import TINY_SHAPE, TinySpec
from ...components.vllm.mlp import PlainMLP
from .base import on_transformers_backend
from .testing import HFNames


class PhiMLP(PlainMLP):
    DOWN = "fc2"


FAMILY = on_transformers_backend(
    "phi",
    norm="model.final_layernorm",
    mlp_cls=PhiMLP,
    head_bias=True,
    notes=(
        "no vLLM implementation: transformers' PhiDecoderLayer on vLLM's Transformers backend "
        "(values keep its batch axis); parallel block: attention and MLP read the same "
        "input_layernorm output; partial rotary; lm_head's bias goes to the logits processor"
    ),
    checkpoint=TinySpec(
        "phi",
        dict(TINY_SHAPE, num_key_value_heads=4, tie_word_embeddings=False),
    ),
    reference=HFNames("model.layers", "model.embed_tokens", "self_attn", "mlp", "fc2"),
)
