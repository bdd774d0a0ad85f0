"""Qwen3-MoE: Qwen3's attention (q/k norms) with routed experts; some blocks may be dense."""

from .tiny import EXPERT_SIZE, LLAMA_SHAPE, MOE, TinySpec
from ...components.vllm.mlp import RoutedMLP
from .base import AVX2, H200, Family
from .qwen2_moe import sparse_step_overrides
from .testing import LLAMA_NAMES

FAMILY = Family(
    "qwen3_moe",
    verified_on=(AVX2, H200),
    mlp_cls=RoutedMLP,
    block_overrides=sparse_step_overrides,
    vllm_class="Qwen3MoeForCausalLM",
    notes=(
        "sparse blocks serve mlp_output only; dense blocks (mlp_only_layers, "
        "decoder_sparse_step) are gated MLPs serving mlp_neurons; queries and keys after "
        "q_norm/k_norm and rotary"
    ),
    # Layer 0 a dense MLP, layer 1 the experts.
    checkpoint=TinySpec(
        "qwen3_moe",
        dict(
            LLAMA_SHAPE,
            **MOE,
            head_dim=32,
            num_experts=4,
            moe_intermediate_size=EXPERT_SIZE,
            norm_topk_prob=True,
            mlp_only_layers=[0],
            tie_word_embeddings=False,
        ),
    ),
    reference=LLAMA_NAMES,
)
