"""Qwen2-MoE: routed experts plus a gated shared expert; some blocks may be dense.

A block is sparse unless it is in ``mlp_only_layers`` or off the
``decoder_sparse_step`` beat (vLLM's and transformers' rule); a dense block is an
ordinary gated MLP and serves its neurons.
"""

from .tiny import EXPERT_SIZE, LLAMA_SHAPE, MOE, TinySpec
from ...components.vllm.mlp import GatedMLP, RoutedMLP
from .base import AVX2, H200, Family
from .testing import LLAMA_NAMES


def sparse_step_overrides(config) -> dict:
    """Dense blocks of a Qwen-MoE checkpoint -> `GatedMLP`."""
    dense_only = set(getattr(config, "mlp_only_layers", None) or ())
    step = getattr(config, "decoder_sparse_step", 1) or 1
    experts = getattr(config, "num_experts", 0) or 0
    return {
        f"model.layers.{i}.mlp": GatedMLP
        for i in range(config.num_hidden_layers)
        if i in dense_only or not (experts > 0 and (i + 1) % step == 0)
    }


FAMILY = Family(
    "qwen2_moe",
    verified_on=(AVX2, H200),
    mlp_cls=RoutedMLP,
    block_overrides=sparse_step_overrides,
    vllm_class="Qwen2MoeForCausalLM",
    notes=(
        "sparse blocks: mlp_output is the routed experts plus the sigmoid-gated shared "
        "expert, and nothing inside is served; dense blocks (mlp_only_layers, "
        "decoder_sparse_step) are gated MLPs serving mlp_neurons"
    ),
    # Layer 0 a dense MLP, layer 1 the experts (plus Qwen2-MoE's shared expert).
    checkpoint=TinySpec(
        "qwen2_moe",
        dict(
            LLAMA_SHAPE,
            **MOE,
            num_experts=4,
            moe_intermediate_size=EXPERT_SIZE,
            shared_expert_intermediate_size=128,
            mlp_only_layers=[0],
            tie_word_embeddings=False,
        ),
    ),
    reference=LLAMA_NAMES,
)
