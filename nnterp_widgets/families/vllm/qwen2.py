"""Qwen2 (and Qwen2.5): Llama-shaped, fused ``(hidden, residual)`` blocks, gated MLP."""

from .base import Family

FAMILY = Family("qwen2", vllm_class="Qwen2ForCausalLM", notes="qkv bias; tied embeddings in the small checkpoints")
