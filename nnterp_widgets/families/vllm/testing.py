"""What a family's tests need besides its tiny checkpoint: where transformers keeps its values.

A family declares these (`Family.reference`) next to its vLLM names, so that one file
says everything about it; ``tests/reference.py`` reads them to run the same checkpoint
in transformers (float32, eager attention) as the independent reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class HFNames:
    """Where a family's standard values are in the transformers implementation.

    ``attention_out`` / ``mlp_out``: the module, relative to the block, whose output is
    that half's contribution to the stream, where it is not the attention / MLP module
    itself (a post-norm: Gemma-2's ``post_attention_layernorm``; Bloom, whose attention
    and MLP add the residual themselves: their output projections). ``down``: the down
    projection under the MLP; a block whose MLP has none (experts) has no neurons.
    """

    layers: str
    embed: str
    attention: str
    mlp: str
    down: str | None
    attention_out: str | None = None
    mlp_out: str | None = None
    #: How the attention interior is captured: "eager" (the modeling module's
    #: ``eager_attention_forward``), "gptj" (GPT-J's ``_attn``), "sdpa" (the
    #: ``scaled_dot_product_attention`` call, pattern recomputed from its q, k and
    #: mask), "fused" (the fused qkv projection's output, split by the module, the
    #: weights the attention returns, the output projection's input).
    interior: str = "eager"
    #: transformers' ``attn_implementation`` for the reference.
    implementation: str = "eager"
    #: ``patch(model)``: makes the transformers model compute what vLLM computes where
    #: the two differ on purpose (Bloom's GELU).
    patch: Callable[[Any], None] | None = None
    #: Fused families only: ``split(attention, fused_qkv) -> (q, k, v)``, each
    #: ``[batch, heads, tokens, head_dim]``.
    split: Callable | None = None
    #: Fused families only: the fused qkv projection and the output projection.
    qkv_proj: str | None = None
    out_proj: str | None = None


#: A Llama-shaped transformers model (``model.layers[i].self_attn`` / ``.mlp.down_proj``);
#: the dense blocks of a mixture of experts have a ``down_proj``, routed ones none.
LLAMA_NAMES = HFNames("model.layers", "model.embed_tokens", "self_attn", "mlp", "down_proj")
#: Llama's names with post-norm contributions (see `components.vllm.post_norm`).
POST_NORM_NAMES = HFNames(
    "model.layers",
    "model.embed_tokens",
    "self_attn",
    "mlp",
    "down_proj",
    attention_out="post_attention_layernorm",
    mlp_out="post_feedforward_layernorm",
)
#: A mixture of experts on every block: no down projection to read neurons at.
EXPERTS_NAMES = HFNames("model.layers", "model.embed_tokens", "self_attn", "mlp", None)
