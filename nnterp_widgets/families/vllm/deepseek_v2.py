"""DeepSeek-V2: multi-head latent attention and routed experts (with shared experts).

vLLM runs the attention in its MLA kernel, on the compressed latent (``kv_c``) and a
shared rotary key: per-head keys and values never exist as tensors, and the kernel's
inputs are not the heads' queries/keys/values. So the block serves
``attention_output`` and none of the six interior values (`LATENT`). The first
``first_k_dense_replace`` blocks (and those off the ``moe_layer_freq`` beat) are
dense gated MLPs and serve their neurons; the rest are mixtures of experts.
"""

from ...components.vllm.attention import INTERIOR
from ...components.vllm.layer import StandardEnvoy, _contribution, _tensor_out, _tensor_out_back
from ...components.vllm.mlp import GatedMLP, RoutedMLP
from ...components.vllm.values import StandardValue, unavailable
from .base import Family

#: Why DeepSeek's attention serves nothing inside its output.
LATENT = (
    "vLLM runs DeepSeek's latent attention in its own kernel, on compressed keys and values; "
    "not mapped on vLLM"
)


class LatentAttention(StandardEnvoy):
    """Multi-head latent attention: its output only."""

    UNAVAILABLE = {name: LATENT for name in INTERIOR}

    attention_output = StandardValue("attention_output", _contribution, _tensor_out, _tensor_out_back)
    attention_queries = unavailable("attention_queries", LATENT)
    attention_keys = unavailable("attention_keys", LATENT)
    attention_values = unavailable("attention_values", LATENT)
    attention_head_outputs = unavailable("attention_head_outputs", LATENT)
    attention_scores = unavailable("attention_scores", LATENT)
    attention_probabilities = unavailable("attention_probabilities", LATENT)


def dense_overrides(config) -> dict:
    """DeepSeek's dense blocks -> `GatedMLP` (vLLM's ``is_moe_layer``, negated)."""
    freq = getattr(config, "moe_layer_freq", 1) or 1
    routed = getattr(config, "n_routed_experts", None)
    first = getattr(config, "first_k_dense_replace", 0) or 0
    return {
        f"model.layers.{i}.mlp": GatedMLP
        for i in range(config.num_hidden_layers)
        if not (routed is not None and i >= first and i % freq == 0)
    }


#: The families' common notes.
DEEPSEEK_NOTES = (
    "latent attention (MLA): attention_output only; dense blocks (first_k_dense_replace, "
    "moe_layer_freq) are gated MLPs serving mlp_neurons, the others routed experts plus "
    "shared experts (mlp_output only); in float16 vLLM rescales the stream by "
    "1/routed_scaling_factor inside the block (float32 and bfloat16 do not); vLLM's CPU "
    "MLA serves only kv_lora_rank + qk_rope_head_dim = 576, and with plain RoPE (no YaRN) "
    "vLLM CPU leaves MLA's rotary part unrotated (wrong tokens, no error)"
)

FAMILY = Family(
    "deepseek_v2",
    attention_cls=LatentAttention,
    mlp_cls=RoutedMLP,
    block_overrides=dense_overrides,
    mla=True,
    sizes={"head_dim": lambda config: config.v_head_dim},
    vllm_class="DeepseekV2ForCausalLM",
    notes=DEEPSEEK_NOTES,
)
