"""Gemma: fused pair, gated tanh-GELU MLP, (1 + w) RMS norms, a scaled embedding."""

from .base import Family

#: What a Gemma engine's token_embeddings is.
SCALED_EMBEDDING = (
    "token_embeddings is the embedding lookup; the stream (layers[0].layer_input) is that "
    "times sqrt(hidden_size), which vLLM applies after embed_tokens"
)

FAMILY = Family("gemma", vllm_class="GemmaForCausalLM", notes=SCALED_EMBEDDING + "; tied head")
