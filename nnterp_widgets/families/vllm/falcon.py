"""Falcon: plain stream; parallel attention and MLP (Falcon-7B's shape); ALiBi or rotary.

vLLM's Falcon projections skip their bias add (``skip_bias_add``) and return
``(output, bias)``; the block adds the biases itself, after the module (in place, or
once for both halves of a parallel block). So a contribution is ``output + bias``
here, and a written contribution goes back with no separate bias, so the block adds
nothing more to it. Split across workers, the block sums both halves' partial outputs
once, before the biases: a contribution is that sum plus the bias, and a written one
goes back as equal shares.
"""

from dataclasses import replace

from .tiny import TinySpec
from ...components.vllm.attention import Attention
from ...components.vllm.layer import contribution_site, share_of_sum, whole_sum
from ...components.vllm.mlp import PlainMLP
from ...components.vllm.values import StandardValue, summed, unbatched
from .base import AVX2, H200, Family
from .bloom import BLOOM_LAYOUT, BLOOM_NAMES


def _with_bias(envoy, raw):
    output, bias = whole_sum(envoy, raw[0]), raw[1]
    return summed(output, bias)


def _without_bias(envoy, raw, value):
    return (unbatched(share_of_sum(envoy, value), raw[0]), None, *raw[2:])


class FalconAttention(Attention):
    attention_output = StandardValue("attention_output", contribution_site, _with_bias, _without_bias)


class FalconMLP(PlainMLP):
    DOWN = "dense_4h_to_h"
    mlp_output = StandardValue("mlp_output", contribution_site, _with_bias, _without_bias)


def _kv_heads(config) -> int:
    if config.new_decoder_architecture:
        return config.num_kv_heads
    return 1 if config.multi_query else config.num_attention_heads


FAMILY = Family(
    "falcon",
    verified_on=(AVX2, H200),
    **BLOOM_LAYOUT,
    attention_cls=FalconAttention,
    mlp_cls=FalconMLP,
    sizes={
        "num_kv_heads": _kv_heads,
        # vLLM's FalconMLP is 4 x hidden whatever ffn_hidden_size says.
        "intermediate_size": lambda config: 4 * config.hidden_size,
    },
    vllm_class="FalconForCausalLM",
    notes=(
        "parallel block (parallel_attn): attention and MLP read the same input_layernorm "
        "output; the projections' biases, which vLLM adds after the modules, are part of "
        "attention_output and mlp_output; with alibi the pattern adds the kernel's slopes "
        "(which vLLM scales by 1/sqrt(head_dim), as transformers' SDPA path does; "
        "transformers' eager path adds ALiBi twice); multi-query: one kv head; the MLP is "
        "4 x hidden (vLLM ignores ffn_hidden_size)"
    ),
    # Falcon-7B's shape (multi-query, parallel attention and MLP), with ALiBi.
    # The MLP is 4 x hidden: vLLM's FalconMLP ignores ffn_hidden_size.
    checkpoint=TinySpec(
        "falcon",
        dict(
            hidden_size=128,
            ffn_hidden_size=512,
            num_hidden_layers=2,
            num_attention_heads=4,
            alibi=True,
            new_decoder_architecture=False,
            multi_query=True,
            parallel_attn=True,
            bias=False,
            max_position_embeddings=1024,
            tie_word_embeddings=True,
        ),
    ),
    # transformers' eager Falcon adds ALiBi twice (once folded into the causal mask as
    # alibi / sqrt(head_dim) by FalconModel, again as (scores + alibi) * inv_norm_factor
    # in FalconAttention): its logits are 3e-2 off both vLLM and its own SDPA path. SDPA
    # adds it once, which is what Falcon means (and what vLLM computes).
    reference=replace(BLOOM_NAMES, interior="sdpa", implementation="sdpa"),
)
