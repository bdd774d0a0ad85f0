"""DeepSeek-V3: DeepSeek-V2's classes on vLLM (latent attention, routed and dense blocks)."""

from .base import Family
from .deepseek_v2 import DEEPSEEK_NOTES, LATENT, LatentAttention, dense_overrides
from ...components.vllm.mlp import RoutedMLP

__all__ = ["FAMILY", "LATENT"]

FAMILY = Family(
    "deepseek_v3",
    attention_cls=LatentAttention,
    mlp_cls=RoutedMLP,
    block_overrides=dense_overrides,
    sizes={"head_dim": lambda config: config.v_head_dim},
    vllm_class="DeepseekV3ForCausalLM",
    notes=(
        "runs on vLLM's DeepseekV2 classes; " + DEEPSEEK_NOTES
        + "; sigmoid routing with e_score_correction_bias and routed_scaling_factor"
    ),
)
