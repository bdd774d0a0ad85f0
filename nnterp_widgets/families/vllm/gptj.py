"""GPT-J: a parallel block (attention and MLP both read ``ln_1``'s output), plain stream.

``layer_output = layer_input + attention_output + mlp_output`` as in the block's own
sum. Rotary on part of each head (``rotary_dim``); the head has a bias, which the
logits processor adds.
"""

from .tiny import TinySpec
from ...components.vllm.layer import PlainLayer
from ...components.vllm.mlp import PlainMLP
from .base import AVX2, H200, Family
from .testing import HFNames


class GPTJMLP(PlainMLP):
    DOWN = "fc_out"


def _rename() -> dict:
    # A class key: GPT-J's attention is ``attn``, and so is the vLLM Attention inside it.
    from vllm.model_executor.models.gpt_j import GPTJAttention

    return {GPTJAttention: "self_attn"}


FAMILY = Family(
    "gptj",
    verified_on=(AVX2, H200),
    layers="transformer.h",
    embed="transformer.wte",
    norm="transformer.ln_f",
    attention="attn",
    layer_cls=PlainLayer,
    mlp_cls=GPTJMLP,
    head_bias=True,
    extra_rename=_rename,
    sizes={"intermediate_size": lambda config: config.n_inner or 4 * config.n_embd},
    vllm_class="GPTJForCausalLM",
    notes=(
        "parallel block: attention and MLP read the same ln_1 output and the block adds "
        "both; rotary on the first rotary_dim of each head; lm_head's bias goes to the "
        "logits processor (project_on_vocab adds it too)"
    ),
    checkpoint=TinySpec(
        "gptj",
        dict(
            n_embd=128,
            n_inner=256,
            n_layer=2,
            n_head=4,
            n_positions=1024,
            rotary_dim=16,  # of the head's 32
            tie_word_embeddings=False,
        ),
    ),
    reference=HFNames("transformer.h", "transformer.wte", "attn", "mlp", "fc_out", interior="gptj"),
)
