"""What a tiny checkpoint is (`TinySpec`), and the shapes the families' checkpoints share.

Each family declares its own tiny checkpoint (`Family.checkpoint`, in
``families/vllm/<model_type>.py``) from these shapes, keeping its family's own
features where it has them (softcaps, sliding windows, parallel blocks, ALiBi,
experts, MLA), sized down. Head size is 32 throughout: vLLM's CPU attention backend
serves only some head sizes (32, 64, 80, ...), and 32 keeps the models tiny.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TinySpec:
    """A tiny checkpoint: ``model_type`` plus the config fields that make it small."""

    model_type: str
    config: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    #: Standard deviation of the seeded init; larger than transformers' 0.02 so
    #: that the streams and patterns of an untrained model are not all flat.
    init_std: float = 0.2
    #: Steps of a short seeded training on the corpus (0: the init as it is), so that
    #: the demo's lens and patterns say something ("The Eiffel Tower is in" -> " Paris").
    train_steps: int = 0


#: A gated-MLP decoder in the Llama shape: 2 layers, 4 heads of 32, 2 kv heads.
LLAMA_SHAPE = dict(
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=2048,
)

#: Sliding windows this small bite on a prompt of a few tokens.
WINDOW = 4
#: Two layers, one of each kind, where a family alternates sliding and full attention.
SLIDING_THEN_FULL = ["sliding_attention", "full_attention"]
#: Mixture-of-experts sizes: 4 experts, 2 per token, each with a small MLP.
MOE = dict(num_experts_per_tok=2)
EXPERT_SIZE = 64

#: The checkpoint the demo and most tests use.
DEFAULT = "qwen2"


# Bench checkpoints: real models' exact shapes with seeded random weights, for bench/
# (never built by the tests: a few GB each).
BENCH_SPECS: dict[str, TinySpec] = {
    # Qwen2.5-0.5B: 24 layers, 14 query / 2 kv heads of 64, hidden 896, MLP 4,864, vocab
    # 151,936 (the local tokenizer's ids, the rest decodable fillers), tied head, float32.
    "qwen2_0.5b": TinySpec(
        "qwen2",
        dict(
            hidden_size=896,
            intermediate_size=4864,
            num_hidden_layers=24,
            num_attention_heads=14,
            num_key_value_heads=2,
            head_dim=64,
            vocab_size=151936,
            tie_word_embeddings=True,
            rope_theta=1_000_000.0,
            rms_norm_eps=1e-6,
            max_position_embeddings=32768,
            max_window_layers=24,
            use_sliding_window=False,
        ),
        init_std=0.02,
    ),
    # Llama-3.1-8B: 32 layers, 32 query / 8 kv heads of 128, hidden 4,096, MLP 14,336,
    # vocab 128,256, untied head, bfloat16. 16 GB: built on the GPU by bench/gpu_build.py.
    "llama3.1_8b": TinySpec(
        "llama",
        dict(
            hidden_size=4096,
            intermediate_size=14336,
            num_hidden_layers=32,
            num_attention_heads=32,
            num_key_value_heads=8,
            head_dim=128,
            vocab_size=128256,
            tie_word_embeddings=False,
            rope_theta=500_000.0,
            rms_norm_eps=1e-5,
            max_position_embeddings=131072,
        ),
        init_std=0.02,
    ),
}
