"""Phi (1, 1.5, 2): on vLLM's Transformers backend; a parallel block, plain GELU MLP, head bias."""

from ...components.vllm.mlp import PlainMLP
from ...components.vllm.transformers_backend import TransformersLayer
from .base import TRANSFORMERS, Family


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
)
