"""Qwen3: Qwen2's block with per-head q/k RMS norms before rotary."""

from .base import Family

FAMILY = Family(
    "qwen3",
    vllm_class="Qwen3ForCausalLM",
    notes="queries and keys are read after the per-head q_norm/k_norm and rotary, as the kernel gets them",
)
