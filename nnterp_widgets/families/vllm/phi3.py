"""Phi-3: vLLM runs it on its Llama classes (``LlamaDecoderLayer``), fused pair."""

from .base import Family

FAMILY = Family(
    "phi3",
    vllm_class="Phi3ForCausalLM",
    notes="runs on vLLM's Llama classes; the checkpoint's fused gate_up_proj and qkv_proj load as they are",
)
