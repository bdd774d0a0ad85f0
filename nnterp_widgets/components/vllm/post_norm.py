"""Post-norm blocks (Gemma-2, Gemma-3, OLMo-2, OLMo-3): each half's contribution is its norm's output.

Such a block adds ``post_attention_layernorm(attention)`` and
``post_feedforward_layernorm(mlp)`` to the stream, so those norms' outputs, not the
attention's or the MLP's, are ``attention_output`` and ``mlp_output``.
"""

from .attention import Attention
from .mlp import GatedMLP


class PostNormAttention(Attention):
    """Attention whose contribution is its post-norm's output."""

    CONTRIBUTION = "post_attention_layernorm"


class PostNormMLP(GatedMLP):
    """A gated MLP whose contribution is its post-norm's output."""

    CONTRIBUTION = "post_feedforward_layernorm"
