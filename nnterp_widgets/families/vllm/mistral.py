"""Mistral: Llama's shape on vLLM's own Mistral classes (fused pair, gated SiLU MLP)."""

from .tiny import LLAMA_SHAPE, TinySpec
from .base import AVX2, H200, Family
from .testing import LLAMA_NAMES

FAMILY = Family(
    "mistral",
    verified_on=(AVX2, H200),
    vllm_class="MistralForCausalLM",
    checkpoint=TinySpec("mistral", dict(LLAMA_SHAPE, head_dim=32, sliding_window=None, tie_word_embeddings=False)),
    reference=LLAMA_NAMES,
)
