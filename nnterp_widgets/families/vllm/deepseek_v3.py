"""DeepSeek-V3: DeepSeek-V2's family on vLLM (latent attention, routed and dense blocks)."""

from dataclasses import replace

from .tiny import TinySpec
from .deepseek_v2 import DEEPSEEK_NOTES, DEEPSEEK_SHAPE, FAMILY as DEEPSEEK_V2, LATENT

__all__ = ["FAMILY", "LATENT"]

# The same classes and rules as V2; only vLLM's model class and the routing differ.
FAMILY = replace(
    DEEPSEEK_V2,
    model_type="deepseek_v3",
    vllm_class="DeepseekV3ForCausalLM",
    notes=(
        "runs on vLLM's DeepseekV2 classes; "
        + DEEPSEEK_NOTES
        + "; sigmoid routing with e_score_correction_bias and routed_scaling_factor"
    ),
    checkpoint=TinySpec(
        "deepseek_v3",
        dict(
            DEEPSEEK_SHAPE,
            q_lora_rank=64,
            topk_method="noaux_tc",
            scoring_func="sigmoid",
            norm_topk_prob=True,
            routed_scaling_factor=2.5,
        ),
    ),
)
