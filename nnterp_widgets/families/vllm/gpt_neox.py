"""GPT-NeoX (Pythia): on vLLM's Transformers backend; a parallel block, plain GELU MLP."""

from .tiny import TINY_SHAPE, TinySpec
from ...components.vllm.mlp import PlainMLP
from .base import on_transformers_backend
from .testing import HFNames


class GPTNeoXMLP(PlainMLP):
    DOWN = "dense_4h_to_h"


FAMILY = on_transformers_backend(
    "gpt_neox",
    embed="model.embed_in",
    norm="model.final_layer_norm",
    attention="attention",
    mlp_cls=GPTNeoXMLP,
    head_bias=True,
    notes=(
        "no vLLM implementation: transformers' GPTNeoXLayer on vLLM's Transformers backend "
        "(values keep its batch axis, the kernel is attention.attn); use_parallel_residual: "
        "attention and MLP both read the block's input, each through its own norm; rotary on "
        "rotary_pct of each head"
    ),
    checkpoint=TinySpec(
        "gpt_neox",
        dict(TINY_SHAPE, use_parallel_residual=True, tie_word_embeddings=False),
    ),
    reference=HFNames("gpt_neox.layers", "gpt_neox.embed_in", "attention", "mlp", "dense_4h_to_h"),
)
