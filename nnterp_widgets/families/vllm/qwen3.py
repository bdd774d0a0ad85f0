"""Qwen3: Qwen2's block with per-head q/k RMS norms before rotary."""

from .tiny import LLAMA_SHAPE, TinySpec
from .base import AVX2, H200, Family
from .testing import LLAMA_NAMES

FAMILY = Family(
    "qwen3",
    verified_on=(AVX2, H200),
    vllm_class="Qwen3ForCausalLM",
    notes="queries and keys are read after the per-head q_norm/k_norm and rotary, as the kernel gets them",
    checkpoint=TinySpec("qwen3", dict(LLAMA_SHAPE, head_dim=32, tie_word_embeddings=True)),
    reference=LLAMA_NAMES,
)
