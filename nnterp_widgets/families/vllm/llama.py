"""Llama: fused ``(hidden, residual)`` blocks, gated SiLU MLP, rotary attention."""

from .base import Family

FAMILY = Family("llama", vllm_class="LlamaForCausalLM")
