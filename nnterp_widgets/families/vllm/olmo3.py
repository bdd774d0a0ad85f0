"""OLMo-3: OLMo-2's block with alternating sliding-window and full attention."""

from ...components.vllm.transformers_backend import TransformersLayer
from .base import TRANSFORMERS, Family
from .gemma2 import PostNormAttention, PostNormMLP
from .olmo2 import OLMO_NOTES

FAMILY = Family(
    "olmo3",
    layer_cls=TransformersLayer,
    attention_cls=PostNormAttention,
    mlp_cls=PostNormMLP,
    head_bias=True,
    backend=TRANSFORMERS,
    vllm_class="TransformersForCausalLM",
    notes=OLMO_NOTES + "; sliding-window layers' patterns use the kernel's window",
)
