"""Llama: fused ``(hidden, residual)`` blocks, gated SiLU MLP, rotary attention."""

from .tiny import LLAMA_SHAPE, TinySpec
from .base import AVX2, H200, Family
from .testing import LLAMA_NAMES

FAMILY = Family(
    "llama",
    verified_on=(AVX2, H200),
    vllm_class="LlamaForCausalLM",
    checkpoint=TinySpec("llama", dict(LLAMA_SHAPE, tie_word_embeddings=False)),
    reference=LLAMA_NAMES,
)
