"""GPT-2: a plain stream, a plain GELU MLP (``c_fc`` -> act -> ``c_proj``), tied head."""

from .tiny import TinySpec
from ...components.vllm.layer import PlainLayer
from ...components.vllm.mlp import PlainMLP
from .base import AVX2, Family, H200, attention_by_class
from .testing import HFNames


class GPT2MLP(PlainMLP):
    DOWN = "c_proj"


#: `TINY_SHAPE` in GPT-2's config names, which GPT-J keeps.
GPT2_SHAPE = dict(n_embd=128, n_inner=256, n_layer=2, n_head=4, n_positions=1024)

#: The block list and final norm of GPT-2's lineage (GPT-J, BLOOM, Falcon): ``transformer.h``
#: of blocks that return one tensor, then ``transformer.ln_f``.
TRANSFORMER_H = dict(layers="transformer.h", norm="transformer.ln_f", layer_cls=PlainLayer)

#: GPT-2's module names and sizes, which GPT-J keeps.
GPT2_LAYOUT = dict(
    TRANSFORMER_H,
    embed="transformer.wte",
    attention="attn",
    sizes={"intermediate_size": lambda config: config.n_inner or 4 * config.n_embd},
)

FAMILY = Family(
    "gpt2",
    **GPT2_LAYOUT,
    mlp_cls=GPT2MLP,
    extra_rename=attention_by_class("vllm.model_executor.models.gpt2", "GPT2Attention"),
    vllm_class="GPT2LMHeadModel",
    notes=(
        "token_embeddings is the token lookup (wte); layers[0].layer_input adds the "
        "position embeddings (wpe); plain MLP: mlp_activation is mlp_neurons; tied head"
    ),
    verified_on=(AVX2, H200),
    checkpoint=TinySpec("gpt2", dict(GPT2_SHAPE)),
    reference=HFNames("transformer.h", "transformer.wte", "attn", "mlp", "c_proj"),
)
