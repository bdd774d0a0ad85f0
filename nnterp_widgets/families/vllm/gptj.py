"""GPT-J: a parallel block (attention and MLP both read ``ln_1``'s output), plain stream.

``layer_output = layer_input + attention_output + mlp_output`` as in the block's own
sum. Rotary on part of each head (``rotary_dim``); the head has a bias, which the
logits processor adds.
"""

from .tiny import TinySpec
from ...components.vllm.mlp import PlainMLP
from .base import AVX2, H200, Family, attention_by_class
from .gpt2 import GPT2_LAYOUT, GPT2_SHAPE
from .testing import HFNames


class GPTJMLP(PlainMLP):
    DOWN = "fc_out"


FAMILY = Family(
    "gptj",
    verified_on=(AVX2, H200),
    **GPT2_LAYOUT,
    mlp_cls=GPTJMLP,
    head_bias=True,
    extra_rename=attention_by_class("vllm.model_executor.models.gpt_j", "GPTJAttention"),
    vllm_class="GPTJForCausalLM",
    notes=(
        "parallel block: attention and MLP read the same ln_1 output and the block adds "
        "both; rotary on the first rotary_dim of each head; lm_head's bias goes to the "
        "logits processor (project_on_vocab adds it too)"
    ),
    checkpoint=TinySpec(
        "gptj",
        dict(GPT2_SHAPE, rotary_dim=16, tie_word_embeddings=False),  # rotary on 16 of the head's 32
    ),
    reference=HFNames("transformer.h", "transformer.wte", "attn", "mlp", "fc_out", interior="gptj"),
)
