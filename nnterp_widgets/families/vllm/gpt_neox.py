"""GPT-NeoX (Pythia): on vLLM's Transformers backend; a parallel block, plain GELU MLP."""

from .tiny import TinySpec
from ...components.vllm.mlp import PlainMLP
from ...components.vllm.transformers_backend import TransformersLayer
from .base import TRANSFORMERS, Family
from .testing import HFNames


class GPTNeoXMLP(PlainMLP):
    DOWN = "dense_4h_to_h"


FAMILY = Family(
    "gpt_neox",
    embed="model.embed_in",
    norm="model.final_layer_norm",
    attention="attention",
    layer_cls=TransformersLayer,
    mlp_cls=GPTNeoXMLP,
    head_bias=True,
    backend=TRANSFORMERS,
    vllm_class="TransformersForCausalLM",
    notes=(
        "no vLLM implementation: transformers' GPTNeoXLayer on vLLM's Transformers backend "
        "(values keep its batch axis, the kernel is attention.attn); use_parallel_residual: "
        "attention and MLP both read the block's input, each through its own norm; rotary on "
        "rotary_pct of each head"
    ),
    checkpoint=TinySpec(
        "gpt_neox",
        dict(
            hidden_size=128,
            intermediate_size=256,
            num_hidden_layers=2,
            num_attention_heads=4,
            max_position_embeddings=1024,
            use_parallel_residual=True,
            tie_word_embeddings=False,
        ),
    ),
    reference=HFNames("gpt_neox.layers", "gpt_neox.embed_in", "attention", "mlp", "dense_4h_to_h"),
)
