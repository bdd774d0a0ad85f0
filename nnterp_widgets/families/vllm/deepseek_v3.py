"""DeepSeek-V3: DeepSeek-V2's family on vLLM (latent attention, routed and dense blocks)."""

from dataclasses import replace

from .deepseek_v2 import DEEPSEEK_NOTES, FAMILY as DEEPSEEK_V2, LATENT

__all__ = ["FAMILY", "LATENT"]

# The same classes and rules as V2; only vLLM's model class and the routing differ.
FAMILY = replace(
    DEEPSEEK_V2,
    model_type="deepseek_v3",
    vllm_class="DeepseekV3ForCausalLM",
    notes=(
        "runs on vLLM's DeepseekV2 classes; " + DEEPSEEK_NOTES
        + "; sigmoid routing with e_score_correction_bias and routed_scaling_factor"
    ),
)
