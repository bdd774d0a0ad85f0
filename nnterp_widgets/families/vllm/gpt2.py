"""GPT-2: a plain stream, a plain GELU MLP (``c_fc`` -> act -> ``c_proj``), tied head."""

from .tiny import TinySpec
from ...components.vllm.layer import PlainLayer
from ...components.vllm.mlp import PlainMLP
from .base import AVX2, Family, H200
from .testing import HFNames


class GPT2MLP(PlainMLP):
    DOWN = "c_proj"


def _rename() -> dict:
    # A class key: GPT-2's attention is ``attn``, and so is the vLLM Attention inside
    # it, so a name key would alias both.
    from vllm.model_executor.models.gpt2 import GPT2Attention

    return {GPT2Attention: "self_attn"}


FAMILY = Family(
    "gpt2",
    layers="transformer.h",
    embed="transformer.wte",
    norm="transformer.ln_f",
    attention="attn",
    layer_cls=PlainLayer,
    mlp_cls=GPT2MLP,
    extra_rename=_rename,
    sizes={"intermediate_size": lambda config: config.n_inner or 4 * config.n_embd},
    vllm_class="GPT2LMHeadModel",
    notes=(
        "token_embeddings is the token lookup (wte); layers[0].layer_input adds the "
        "position embeddings (wpe); plain MLP: mlp_activation is mlp_neurons; tied head"
    ),
    verified_on=(AVX2, H200),
    checkpoint=TinySpec("gpt2", dict(n_embd=128, n_layer=2, n_head=4, n_positions=1024, n_inner=256)),
    reference=HFNames("transformer.h", "transformer.wte", "attn", "mlp", "c_proj"),
)
