"""OLMoE: routed experts on every block, q/k norms over all heads."""

from ...components.vllm.mlp import RoutedMLP
from .base import Family

FAMILY = Family(
    "olmoe",
    mlp_cls=RoutedMLP,
    vllm_class="OlmoeForCausalLM",
    notes="every block is a mixture of experts (mlp_output only); q_norm/k_norm over all heads before rotary",
)
