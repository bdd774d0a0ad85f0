"""BLOOM: plain stream, ALiBi, a layer norm on the embedding, exact-GELU MLP on vLLM."""

from ...components.vllm.layer import PlainLayer
from ...components.vllm.mlp import PlainMLP
from .base import Family


class BloomMLP(PlainMLP):
    DOWN = "dense_4h_to_h"


FAMILY = Family(
    "bloom",
    layers="transformer.h",
    embed="transformer.word_embeddings",
    norm="transformer.ln_f",
    attention="self_attention",
    layer_cls=PlainLayer,
    mlp_cls=BloomMLP,
    sizes={"intermediate_size": lambda config: 4 * config.hidden_size},
    vllm_class="BloomForCausalLM",
    notes=(
        "token_embeddings is the embedding lookup, before word_embeddings_layernorm "
        "(layers[0].layer_input is after it); ALiBi: the pattern adds the kernel's slopes; "
        "vLLM's BloomMLP uses exact (erf) GELU where transformers' Bloom uses the tanh "
        "approximation (about 3e-4 in log-probabilities on the tiny checkpoint)"
    ),
)
