"""Mixtral: Llama's block with a mixture of experts (``block_sparse_moe``) on every layer."""

from ...components.vllm.mlp import RoutedMLP
from .base import Family

FAMILY = Family(
    "mixtral",
    mlp="block_sparse_moe",
    mlp_cls=RoutedMLP,
    vllm_class="MixtralForCausalLM",
    notes=(
        "block_sparse_moe is mlp; the experts are one fused MoE kernel, so mlp_output "
        "(the routed sum) is all the MLP serves"
    ),
)
