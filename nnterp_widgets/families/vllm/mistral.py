"""Mistral: Llama's shape on vLLM's own Mistral classes (fused pair, gated SiLU MLP)."""

from .base import Family

FAMILY = Family("mistral", vllm_class="MistralForCausalLM")
