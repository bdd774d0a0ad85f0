"""The checkpoints the package builds besides the families' tiny ones: the default tiny
checkpoint's name, and the bench checkpoints (real models' exact shapes). What a spec is,
and the shapes the families share, is `families.vllm.tiny`."""

from __future__ import annotations

from ..families.vllm.tiny import TinySpec

__all__ = ["BENCH_SPECS", "DEFAULT", "TinySpec"]

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
    # The 8B shape's 32 layers, every width tiny: what a request's reads cost per layer
    # and per prompt (hooks, copies to the host) without the forward's compute hiding it,
    # on a CPU (bench/gpu_dataset_parts.py).
    "llama_thin_32": TinySpec(
        "llama",
        dict(
            hidden_size=128,
            intermediate_size=128,
            num_hidden_layers=32,
            num_attention_heads=8,
            num_key_value_heads=2,
            head_dim=32,
            vocab_size=2048,
            tie_word_embeddings=False,
            max_position_embeddings=2048,
        ),
        init_std=0.02,
    ),
}
