"""BLOOM: plain stream, ALiBi, a layer norm on the embedding, exact-GELU MLP on vLLM."""

from dataclasses import replace

from .tiny import TinySpec
from ...components.vllm.mlp import PlainMLP
from .base import AVX2, H200, Family
from .gpt2 import TRANSFORMER_H
from .testing import HFNames


class BloomMLP(PlainMLP):
    DOWN = "dense_4h_to_h"


def _exact_gelu(model) -> None:
    # The reference's patch (`HFNames.patch`): vLLM's BloomMLP uses exact (erf) GELU
    # (get_act_fn("gelu")); transformers' Bloom uses its tanh approximation
    # (bloom_gelu_forward), a 3e-4 gap in log-probabilities on the tiny checkpoint
    # (docs/families_survey.md). The engine's values are held to what vLLM computes,
    # so the reference's GELU is swapped for the exact one; nothing else changes.
    import torch

    for block in model.transformer.h:
        block.mlp.gelu_impl = torch.nn.GELU()


#: Where transformers keeps BLOOM's values, as it does Falcon's.
BLOOM_NAMES = HFNames("transformer.h", "transformer.word_embeddings", "self_attention", "mlp", "dense_4h_to_h")

#: BLOOM's module names in vLLM, which Falcon keeps.
BLOOM_LAYOUT = dict(TRANSFORMER_H, embed="transformer.word_embeddings", attention="self_attention")

FAMILY = Family(
    "bloom",
    verified_on=(AVX2, H200),
    **BLOOM_LAYOUT,
    mlp_cls=BloomMLP,
    sizes={"intermediate_size": lambda config: 4 * config.hidden_size},
    vllm_class="BloomForCausalLM",
    notes=(
        "token_embeddings is the embedding lookup, before word_embeddings_layernorm "
        "(layers[0].layer_input is after it); ALiBi: the pattern adds the kernel's slopes; "
        "vLLM's BloomMLP uses exact (erf) GELU where transformers' Bloom uses the tanh "
        "approximation (about 3e-4 in log-probabilities on the tiny checkpoint)"
    ),
    # Bloom's MLP is always 4 x hidden: 512 here.
    checkpoint=TinySpec("bloom", dict(hidden_size=128, n_layer=2, n_head=4, tie_word_embeddings=True)),
    reference=replace(
        BLOOM_NAMES,
        attention_out="self_attention.dense",
        mlp_out="mlp.dense_4h_to_h",
        interior="fused",
        patch=_exact_gelu,
        split=lambda attention, fused: attention._reshape(fused),  # noqa: SLF001 - vLLM's own split of BLOOM's qkv
        qkv_proj="query_key_value",
        out_proj="dense",
    ),
)
