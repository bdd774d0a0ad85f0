"""Phi (1, 1.5, 2): on vLLM's Transformers backend; a parallel block, plain GELU MLP, head bias."""

from .tiny import TinySpec
from ...components.vllm.mlp import PlainMLP
from ...components.vllm.transformers_backend import TransformersLayer
from .base import TRANSFORMERS, Family
from .testing import HFNames


class PhiMLP(PlainMLP):
    DOWN = "fc2"


FAMILY = Family(
    "phi",
    norm="model.final_layernorm",
    layer_cls=TransformersLayer,
    mlp_cls=PhiMLP,
    head_bias=True,
    backend=TRANSFORMERS,
    vllm_class="TransformersForCausalLM",
    notes=(
        "no vLLM implementation: transformers' PhiDecoderLayer on vLLM's Transformers backend "
        "(values keep its batch axis); parallel block: attention and MLP read the same "
        "input_layernorm output; partial rotary; lm_head's bias goes to the logits processor"
    ),
    checkpoint=TinySpec(
        "phi",
        dict(
            hidden_size=128,
            intermediate_size=256,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=4,
            max_position_embeddings=1024,
            tie_word_embeddings=False,
        ),
    ),
    reference=HFNames("model.layers", "model.embed_tokens", "self_attn", "mlp", "fc2"),
)
