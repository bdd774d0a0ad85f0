"""OLMoE: routed experts on every block, q/k norms over all heads."""

from .tiny import EXPERT_SIZE, LLAMA_SHAPE, MOE, TinySpec
from ...components.vllm.mlp import RoutedMLP
from .base import AVX2, H200, Family
from .testing import EXPERTS_NAMES

FAMILY = Family(
    "olmoe",
    verified_on=(AVX2, H200),
    mlp_cls=RoutedMLP,
    vllm_class="OlmoeForCausalLM",
    notes="every block is a mixture of experts (mlp_output only); q_norm/k_norm over all heads before rotary",
    checkpoint=TinySpec(
        "olmoe",
        dict(LLAMA_SHAPE, **MOE, intermediate_size=EXPERT_SIZE, num_experts=4, tie_word_embeddings=False),
    ),
    reference=EXPERTS_NAMES,
)
