"""What each tiny checkpoint is: a transformers config, small enough for a CPU test.

Head size is 32 throughout: vLLM's CPU attention backend serves only some head
sizes (32, 64, 80, ...), and 32 keeps the models tiny.
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


# A gated-MLP decoder in the Llama shape: 2 layers, 4 heads of 32, 2 kv heads.
_LLAMA_SHAPE = dict(
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=2048,
)

SPECS: dict[str, TinySpec] = {
    "qwen2": TinySpec("qwen2", dict(_LLAMA_SHAPE, tie_word_embeddings=True), train_steps=120),
    "llama": TinySpec("llama", dict(_LLAMA_SHAPE, tie_word_embeddings=False)),
    "gpt2": TinySpec(
        "gpt2", dict(n_embd=128, n_layer=2, n_head=4, n_positions=1024, n_inner=256)
    ),
}

# The other families the survey (tools/survey_families.py, docs/families_survey.md)
# runs on vLLM's CPU backend. Each keeps its family's own features where it has
# them (softcaps, sliding windows, parallel blocks, ALiBi, experts, MLA), sized down.

# Sliding windows this small bite on a prompt of a few tokens.
_WINDOW = 4
# Two layers, one of each kind, where a family alternates sliding and full attention.
_SLIDING_THEN_FULL = ["sliding_attention", "full_attention"]
# Mixture-of-experts sizes: 4 experts, 2 per token, each with a small MLP.
_MOE = dict(num_experts_per_tok=2)
_EXPERT_SIZE = 64

# DeepSeek's multi-head latent attention: layer 0 a dense MLP, layer 1 the experts.
# The latent is DeepSeek's full size: vLLM's MLA serves only kv_lora_rank +
# qk_rope_head_dim in {320, 512, 576}, and its CPU MLA backend only 576 (512 + 64).
_DEEPSEEK = dict(
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=4,
    max_position_embeddings=1024,
    q_lora_rank=None,
    kv_lora_rank=512,
    qk_rope_head_dim=64,
    qk_nope_head_dim=32,
    v_head_dim=32,
    n_routed_experts=4,
    n_shared_experts=1,
    moe_intermediate_size=_EXPERT_SIZE,
    first_k_dense_replace=1,
    moe_layer_freq=1,
    n_group=1,
    topk_group=1,
    # YaRN, as DeepSeek's own configs have it. With plain RoPE, vLLM's CPU rotary
    # kernel leaves MLA's q_pe/k_pe unrotated (docs/families_survey.md).
    rope_parameters=dict(
        rope_type="yarn",
        rope_theta=10000.0,
        factor=4.0,
        original_max_position_embeddings=256,
        beta_fast=32.0,
        beta_slow=1.0,
        mscale=0.707,
        mscale_all_dim=0.707,
    ),
    tie_word_embeddings=False,
    **_MOE,
)

SPECS.update(
    {
        "mistral": TinySpec(
            "mistral",
            dict(_LLAMA_SHAPE, head_dim=32, sliding_window=None, tie_word_embeddings=False),
        ),
        "qwen3": TinySpec("qwen3", dict(_LLAMA_SHAPE, head_dim=32, tie_word_embeddings=True)),
        "gemma": TinySpec("gemma", dict(_LLAMA_SHAPE, head_dim=32, tie_word_embeddings=True)),
        "gemma2": TinySpec(
            "gemma2",
            dict(
                _LLAMA_SHAPE,
                head_dim=32,
                query_pre_attn_scalar=32,
                sliding_window=_WINDOW,
                layer_types=_SLIDING_THEN_FULL,
                attn_logit_softcapping=50.0,
                final_logit_softcapping=30.0,
                tie_word_embeddings=True,
            ),
        ),
        "gemma3_text": TinySpec(
            "gemma3_text",
            dict(
                _LLAMA_SHAPE,
                head_dim=32,
                query_pre_attn_scalar=32,
                sliding_window=_WINDOW,
                layer_types=_SLIDING_THEN_FULL,
                tie_word_embeddings=True,
            ),
        ),
        "phi3": TinySpec("phi3", dict(_LLAMA_SHAPE, tie_word_embeddings=False)),
        "gpt_neox": TinySpec(
            "gpt_neox",
            dict(
                hidden_size=128,
                intermediate_size=256,
                num_hidden_layers=2,
                num_attention_heads=4,
                max_position_embeddings=1024,
                use_parallel_residual=True,
                tie_word_embeddings=False,
            ),
        ),
        "gptj": TinySpec(
            "gptj",
            dict(
                n_embd=128,
                n_inner=256,
                n_layer=2,
                n_head=4,
                n_positions=1024,
                rotary_dim=16,  # of the head's 32
                tie_word_embeddings=False,
            ),
        ),
        "phi": TinySpec(
            "phi",
            dict(
                hidden_size=128,
                intermediate_size=256,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=4,
                max_position_embeddings=1024,
                tie_word_embeddings=False,
            ),
        ),
        # Falcon-7B's shape (multi-query, parallel attention and MLP), with ALiBi.
        # The MLP is 4 x hidden: vLLM's FalconMLP ignores ffn_hidden_size.
        "falcon": TinySpec(
            "falcon",
            dict(
                hidden_size=128,
                ffn_hidden_size=512,
                num_hidden_layers=2,
                num_attention_heads=4,
                alibi=True,
                new_decoder_architecture=False,
                multi_query=True,
                parallel_attn=True,
                bias=False,
                max_position_embeddings=1024,
                tie_word_embeddings=True,
            ),
        ),
        # Bloom's MLP is always 4 x hidden: 512 here.
        "bloom": TinySpec(
            "bloom", dict(hidden_size=128, n_layer=2, n_head=4, tie_word_embeddings=True)
        ),
        "mpt": TinySpec(
            "mpt",
            dict(
                d_model=128,
                expansion_ratio=2,
                n_layers=2,
                n_heads=4,
                max_seq_len=1024,
                attn_config=dict(alibi=True),
                tie_word_embeddings=True,
            ),
        ),
        "olmo2": TinySpec("olmo2", dict(_LLAMA_SHAPE, tie_word_embeddings=False)),
        "olmo3": TinySpec(
            "olmo3",
            dict(
                _LLAMA_SHAPE,
                sliding_window=_WINDOW,
                layer_types=_SLIDING_THEN_FULL,
                tie_word_embeddings=False,
            ),
        ),
        "mixtral": TinySpec(
            "mixtral",
            dict(
                _LLAMA_SHAPE,
                **_MOE,
                intermediate_size=_EXPERT_SIZE,
                num_local_experts=4,
                sliding_window=None,
                tie_word_embeddings=False,
            ),
        ),
        # Layer 0 a dense MLP, layer 1 the experts (plus Qwen2-MoE's shared expert).
        "qwen2_moe": TinySpec(
            "qwen2_moe",
            dict(
                _LLAMA_SHAPE,
                **_MOE,
                num_experts=4,
                moe_intermediate_size=_EXPERT_SIZE,
                shared_expert_intermediate_size=128,
                mlp_only_layers=[0],
                tie_word_embeddings=False,
            ),
        ),
        "qwen3_moe": TinySpec(
            "qwen3_moe",
            dict(
                _LLAMA_SHAPE,
                **_MOE,
                head_dim=32,
                num_experts=4,
                moe_intermediate_size=_EXPERT_SIZE,
                norm_topk_prob=True,
                mlp_only_layers=[0],
                tie_word_embeddings=False,
            ),
        ),
        "olmoe": TinySpec(
            "olmoe",
            dict(
                _LLAMA_SHAPE,
                **_MOE,
                intermediate_size=_EXPERT_SIZE,
                num_experts=4,
                tie_word_embeddings=False,
            ),
        ),
        "deepseek_v2": TinySpec("deepseek_v2", dict(_DEEPSEEK, topk_method="greedy")),
        "deepseek_v3": TinySpec(
            "deepseek_v3",
            dict(
                _DEEPSEEK,
                q_lora_rank=64,
                topk_method="noaux_tc",
                scoring_func="sigmoid",
                norm_topk_prob=True,
                routed_scaling_factor=2.5,
            ),
        ),
    }
)

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
}
