"""Gemma: fused pair, gated tanh-GELU MLP, (1 + w) RMS norms, a scaled embedding."""

from .tiny import LLAMA_SHAPE, TinySpec
from .base import AVX2, H200, Family
from .testing import LLAMA_NAMES

#: What a Gemma engine's token_embeddings is.
SCALED_EMBEDDING = (
    "token_embeddings is the embedding lookup; the stream (layers[0].layer_input) is that "
    "times sqrt(hidden_size), which vLLM applies after embed_tokens"
)

FAMILY = Family(
    "gemma",
    verified_on=(AVX2, H200),
    vllm_class="GemmaForCausalLM",
    notes=SCALED_EMBEDDING + "; tied head",
    checkpoint=TinySpec("gemma", dict(LLAMA_SHAPE, head_dim=32, tie_word_embeddings=True)),
    reference=LLAMA_NAMES,
    # Gemma multiplies the embedding by sqrt(hidden_size) (11.3 here) before the first
    # block, and its MLP outputs reach ~170 and its stream ~250 on this checkpoint (the
    # Llama-shaped families' stay under ~60). float32 rounding grows with the values:
    # vLLM and transformers differ by up to 4.7e-4 in the last stream (about 2e-6 of its
    # scale), and the CPU kernels' reduction order varies from run to run.
    tolerance=dict(atol=1e-3, rtol=1e-4),
)
