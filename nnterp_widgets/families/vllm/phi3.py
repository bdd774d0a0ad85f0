"""Phi-3: vLLM runs it on its Llama classes (``LlamaDecoderLayer``), fused pair."""

from .tiny import LLAMA_SHAPE, TinySpec
from .base import AVX2, H200, Family
from .testing import LLAMA_NAMES

FAMILY = Family(
    "phi3",
    verified_on=(AVX2, H200),
    vllm_class="Phi3ForCausalLM",
    notes="runs on vLLM's Llama classes; the checkpoint's fused gate_up_proj and qkv_proj load as they are",
    checkpoint=TinySpec("phi3", dict(LLAMA_SHAPE, tie_word_embeddings=False)),
    reference=LLAMA_NAMES,
)
