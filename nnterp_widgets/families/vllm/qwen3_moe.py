"""Qwen3-MoE: Qwen3's attention (q/k norms) with routed experts; some blocks may be dense."""

from ...components.vllm.mlp import RoutedMLP
from .base import Family
from .qwen2_moe import sparse_step_overrides

FAMILY = Family(
    "qwen3_moe",
    mlp_cls=RoutedMLP,
    block_overrides=sparse_step_overrides,
    vllm_class="Qwen3MoeForCausalLM",
    notes=(
        "sparse blocks serve mlp_output only; dense blocks (mlp_only_layers, "
        "decoder_sparse_step) are gated MLPs serving mlp_neurons; queries and keys after "
        "q_norm/k_norm and rotary"
    ),
)
