"""DeepSeek-V2: multi-head latent attention and routed experts (with shared experts).

vLLM runs the attention in its MLA kernel, on the compressed latent (``kv_c``) and a
shared rotary key: per-head keys and values never exist as tensors, and the kernel's
inputs are not the heads' queries/keys/values. So the block serves
``attention_output`` and none of the six interior values (`LATENT`). The first
``first_k_dense_replace`` blocks (and those off the ``moe_layer_freq`` beat) are
dense gated MLPs and serve their neurons; the rest are mixtures of experts.
"""

from .tiny import EXPERT_SIZE, MOE, TINY_SHAPE, TinySpec
from ...components.vllm.attention import INTERIOR
from ...components.vllm.layer import StandardEnvoy, contribution_site, tensor_out, tensor_out_back
from ...components.vllm.mlp import GatedMLP, RoutedMLP
from ...components.vllm.values import StandardValue, unavailable
from .base import AVX2, H200, Family
from .testing import LLAMA_NAMES

#: Why DeepSeek's attention serves nothing inside its output.
LATENT = "vLLM runs DeepSeek's latent attention in its own kernel, on compressed keys and values; not mapped on vLLM"


class LatentAttention(StandardEnvoy):
    """Multi-head latent attention: its output only."""

    UNAVAILABLE = {name: LATENT for name in INTERIOR}

    attention_output = StandardValue("attention_output", contribution_site, tensor_out, tensor_out_back)
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


#: DeepSeek's tiny shape: multi-head latent attention, layer 0 a dense MLP, layer 1 the
#: experts. The latent and the head dims are DeepSeek's full size: vLLM's MLA serves only
#: kv_lora_rank + qk_rope_head_dim in {320, 512, 576}, and its CPU MLA backend only 576
#: (512 + 64); on a GPU, vLLM 0.26's FlashAttention MLA prefill takes only a few head
#: dims (qk_nope, qk_rope, v), DeepSeek's (128, 64, 128) among them.
DEEPSEEK_SHAPE = dict(
    TINY_SHAPE,
    num_key_value_heads=4,
    q_lora_rank=None,
    kv_lora_rank=512,
    qk_rope_head_dim=64,
    qk_nope_head_dim=128,
    v_head_dim=128,
    n_routed_experts=4,
    n_shared_experts=1,
    moe_intermediate_size=EXPERT_SIZE,
    first_k_dense_replace=1,
    moe_layer_freq=1,
    n_group=1,
    topk_group=1,
    # YaRN, as DeepSeek's own configs have it. With plain RoPE, vLLM's CPU rotary
    # kernel leaves MLA's q_pe/k_pe unrotated (docs/families_survey.md).
    rope_parameters=dict(
        rope_type="yarn",
        rope_theta=10000.0,
        factor=4.0,
        original_max_position_embeddings=256,
        beta_fast=32.0,
        beta_slow=1.0,
        mscale=0.707,
        mscale_all_dim=0.707,
    ),
    tie_word_embeddings=False,
    **MOE,
)

#: DeepSeek's latent attention runs in vLLM's MLA kernel on the compressed latent,
#: multiplying by kv_b_proj's halves in another order than transformers' explicit
#: per-head keys and values, and its experts sum in another order too: each
#: contribution is off by up to ~1.2e-4 on values up to ~36, and the stream (up to
#: ~65) by up to 2e-4 (3e-6 of its scale). The logits agree to 3e-5.
DEEPSEEK_TOLERANCE = dict(atol=4e-4, rtol=1e-4)

#: The families' common notes.
DEEPSEEK_NOTES = (
    "latent attention (MLA): attention_output only; dense blocks (first_k_dense_replace, "
    "moe_layer_freq) are gated MLPs serving mlp_neurons, the others routed experts plus "
    "shared experts (mlp_output only); on a CPU the engine runs vLLM's reference CPU_MLA backend "
    "on every instruction set (vLLM would pick its bfloat16-only AMX_MLA on an AMX CPU); in float16 vLLM rescales the stream by "
    "1/routed_scaling_factor inside the block (float32 and bfloat16 do not); vLLM's CPU "
    "MLA serves only kv_lora_rank + qk_rope_head_dim = 576, and with plain RoPE (no YaRN) "
    "vLLM CPU leaves MLA's rotary part unrotated (wrong tokens, no error)"
)

FAMILY = Family(
    "deepseek_v2",
    verified_on=(AVX2, H200),
    attention_cls=LatentAttention,
    mlp_cls=RoutedMLP,
    block_overrides=dense_overrides,
    mla=True,
    sizes={"head_dim": lambda config: config.v_head_dim},
    vllm_class="DeepseekV2ForCausalLM",
    notes=DEEPSEEK_NOTES,
    checkpoint=TinySpec("deepseek_v2", dict(DEEPSEEK_SHAPE, topk_method="greedy")),
    # Dense blocks have a down_proj, routed ones none (their experts are fused).
    reference=LLAMA_NAMES,
    tolerance=DEEPSEEK_TOLERANCE,
)
