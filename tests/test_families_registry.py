"""Family lookup without an engine: known families, declarations, the generated table."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from nnterp_widgets.checkpoints import specs
from nnterp_widgets.families.vllm import UnknownFamily, families, family_for, known
from nnterp_widgets.families.vllm.base import AMX, AVX2, H200
from seed_text import SEED_GATED, SEED_LATENT, SEED_ROUTED


def test_unknown_model_type_names_the_known_families():
    with pytest.raises(UnknownFamily) as error:
        family_for("bert")
    message = str(error.value)
    assert "'bert'" in message
    for name in known():
        assert name in message


def test_unknown_checkpoint_fails_before_any_engine(tmp_path):
    from transformers import BertConfig

    BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=1, intermediate_size=32).save_pretrained(
        tmp_path
    )
    from nnterp_widgets import StandardizedVLLM

    with pytest.raises(UnknownFamily, match="known families are"):
        StandardizedVLLM(tmp_path)


def test_conventions():
    assert family_for("qwen2").convention == "fused pair"
    assert family_for("gpt2").convention == "plain stream"
    for name in ("gptj", "falcon", "bloom", "mpt"):
        assert family_for(name).convention == "plain stream", name
    for name in ("gpt_neox", "phi", "olmo2", "olmo3"):
        family = family_for(name)
        assert family.convention == "plain stream, batch axis kept", name
        assert family.backend == "transformers"
        assert family.head_bias  # the backend always hands the processor lm_head.bias


#: The folder's modules that are not families.
NOT_FAMILIES = {"__init__", "base", "table", "testing", "tiny"}


def test_the_registry_is_the_folder():
    import nnterp_widgets.families.vllm as package

    modules = {path.stem for path in Path(package.__file__).parent.glob("*.py")} - NOT_FAMILIES
    assert set(known()) == modules
    assert list(known()) == sorted(modules)


def test_every_family_declares_what_its_tests_need():
    for name, family in families().items():
        assert family.model_type == name
        assert importlib.import_module(f"nnterp_widgets.families.vllm.{name}").FAMILY is family
        assert family.checkpoint is not None and family.checkpoint.model_type == name, name
        assert family.reference is not None, name
        assert set(family.verified_on) <= {AVX2, AMX, H200}, name
    assert list(specs()) == list(known())


def test_every_family_is_one_of_the_seeds_kinds():
    # What a family cannot serve is one of the seed's combinations: a gated MLP's
    # activation, nothing, a mixture's interior, or latent attention's interior too.
    from nnterp_widgets.components.vllm.attention import INTERIOR

    gated = {"mlp.mlp_activation": SEED_GATED}
    routed = {"mlp.mlp_neurons": SEED_ROUTED, "mlp.mlp_activation": SEED_ROUTED}
    latent = {f"self_attn.{name}": SEED_LATENT for name in INTERIOR}
    kinds = [gated, {}, routed, {**latent, **routed}]
    for name, family in families().items():
        assert family.unavailable() in kinds, name


def test_reason_constants_are_the_seeds():
    from nnterp_widgets.components.vllm.mlp import ROUTED
    from nnterp_widgets.families.vllm import deepseek_v2, deepseek_v3

    assert deepseek_v2.LATENT == SEED_LATENT
    assert deepseek_v3.LATENT is deepseek_v2.LATENT
    assert ROUTED == SEED_ROUTED


def test_head_biases():
    assert {name for name, family in families().items() if family.head_bias} == {
        "gptj",
        "gpt_neox",
        "phi",
        "olmo2",
        "olmo3",
    }


def _config(name):
    from transformers import AutoConfig

    spec = family_for(name).checkpoint
    return AutoConfig.for_model(spec.model_type, **spec.config)


@pytest.mark.parametrize("name", ["qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3"])
def test_dense_blocks_of_a_mixture_are_overridden(name):
    from nnterp_widgets.components.vllm.mlp import GatedMLP, RoutedMLP

    family = family_for(name)
    envoys = family.envoys(_config(name))
    assert envoys["model.layers.0.mlp"] is GatedMLP
    assert "model.layers.1.mlp" not in envoys
    assert envoys["model.layers.*.mlp"] is RoutedMLP
    # Overrides come first: nnsight takes the first matching path key.
    keys = list(envoys)
    assert keys.index("model.layers.0.mlp") < keys.index("model.layers.*.mlp")


def test_qwen_moe_sparse_step_rule():
    from nnterp_widgets.families.vllm.qwen2_moe import sparse_step_overrides
    from transformers import Qwen2MoeConfig

    config = Qwen2MoeConfig(num_hidden_layers=6, decoder_sparse_step=2, mlp_only_layers=[3], num_experts=4)
    # Sparse where (i + 1) % 2 == 0 and i not in mlp_only_layers: 1 and 5.
    assert sorted(sparse_step_overrides(config)) == [f"model.layers.{i}.mlp" for i in (0, 2, 3, 4)]


def test_deepseek_dense_rule():
    from nnterp_widgets.families.vllm.deepseek_v2 import dense_overrides
    from transformers import DeepseekV3Config

    config = DeepseekV3Config(num_hidden_layers=5, first_k_dense_replace=3, n_routed_experts=4)
    assert sorted(dense_overrides(config)) == [f"model.layers.{i}.mlp" for i in range(3)]


def test_gemma2_head_is_the_embedding():
    names = family_for("gemma2").rename()
    assert names["model.embed_tokens"] == ["embed_tokens", "lm_head"]


def test_mpt_is_declared_with_the_engines_error():
    family = family_for("mpt")
    assert family.engine_error.startswith(
        "Model architecture MptForCausalLM was supported in vLLM until v0.28.0, and is not supported anymore"
    )
    assert all(family.engine_error is None for name, family in families().items() if name != "mpt")


def test_families_doc_is_generated_from_the_code():
    from nnterp_widgets.families.vllm.table import DOC, render

    assert DOC.read_text() == render(), "docs/families.md is stale: run python -m nnterp_widgets.families.vllm.table"


def test_families_doc_lists_every_family_and_reason():
    from nnterp_widgets.families.vllm.table import render

    text = render()
    for name in known():
        assert f"\n| {name} |" in text
    assert SEED_LATENT in text and SEED_ROUTED in text


def test_this_vllms_transformers_backend_puts_the_kernel_in_the_tree():
    """The premise of the Transformers-backend families on the pinned CPU stack."""
    from nnterp_widgets.components.vllm import transformers_backend

    assert transformers_backend.kernel_in_tree()


def test_a_backend_that_hides_its_kernels_is_refused_before_any_engine(monkeypatch):
    """As on CUDA vLLM 0.26: the engine says why instead of failing inside a trace."""
    from nnterp_widgets import StandardizedVLLM
    from nnterp_widgets.checkpoints import checkpoint
    from nnterp_widgets.components.vllm import transformers_backend

    monkeypatch.setattr(transformers_backend, "kernel_in_tree", lambda: False)
    with pytest.raises(RuntimeError, match="phi: this vLLM's Transformers backend keeps") as error:
        StandardizedVLLM(checkpoint("phi"))
    assert transformers_backend.KERNEL_OUTSIDE_TREE in str(error.value)
