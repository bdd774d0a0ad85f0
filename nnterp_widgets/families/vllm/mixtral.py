"""Mixtral: Llama's block with a mixture of experts (``block_sparse_moe``) on every layer."""

from .tiny import EXPERT_SIZE, LLAMA_SHAPE, MOE, TinySpec
from ...components.vllm.mlp import RoutedMLP
from .base import AVX2, H200, Family
from .testing import EXPERTS_NAMES

FAMILY = Family(
    "mixtral",
    verified_on=(AVX2, H200),
    mlp="block_sparse_moe",
    mlp_cls=RoutedMLP,
    vllm_class="MixtralForCausalLM",
    notes=(
        "block_sparse_moe is mlp; the experts are one fused MoE kernel, so mlp_output "
        "(the routed sum) is all the MLP serves"
    ),
    checkpoint=TinySpec(
        "mixtral",
        dict(
            LLAMA_SHAPE,
            **MOE,
            intermediate_size=EXPERT_SIZE,
            num_local_experts=4,
            sliding_window=None,
            tie_word_embeddings=False,
        ),
    ),
    reference=EXPERTS_NAMES,
)
