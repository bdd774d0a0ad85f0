"""Qwen2 (and Qwen2.5): Llama-shaped, fused ``(hidden, residual)`` blocks, gated MLP."""

from .tiny import LLAMA_SHAPE, TinySpec
from .base import AVX2, Family, H200
from .testing import LLAMA_NAMES

FAMILY = Family(
    "qwen2",
    vllm_class="Qwen2ForCausalLM",
    notes="qkv bias; tied embeddings in the small checkpoints",
    verified_on=(AVX2, H200),
    checkpoint=TinySpec("qwen2", dict(LLAMA_SHAPE, tie_word_embeddings=True), train_steps=120),
    reference=LLAMA_NAMES,
)
