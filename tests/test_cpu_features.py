"""What the CPU's instruction set changes in the engine, checked from any CPU.

vLLM's CPU backend reads the CPU's features (``torch.cpu._is_amx_tile_supported()``)
to choose kernels: the MLA attention backend (AMX_MLA on an AMX CPU), the MoE experts'
ISA, the attention ISA, packed linear kernels; the ones it chooses in bfloat16 repack
weights after loading, which the client's meta build runs too. The engine's own
processes cannot run AMX kernels on an AVX2 machine (loading vLLM's AMX kernel library
there dies of an illegal instruction), so these tests force vLLM's AMX branches in the
client's meta build only: the build takes the AMX code path and must succeed, and the
engine settings must choose, on an AMX CPU, the backend the suite runs on AVX2.
"""

from __future__ import annotations

import pytest
import torch

from conftest import ENGINE_KWARGS
from nnterp_widgets.checkpoints import checkpoint
from nnterp_widgets.engine import platform
from nnterp_widgets.families.vllm import families

#: Each test builds vLLM's meta tree (no engine process, but vLLM's loader and tens of
#: seconds): with the engine tests, not the fast part.
pytestmark = pytest.mark.engine

#: The AMX kernel library's declaration of the op (read from vLLM's ``_C.abi3.so``),
#: which the AVX2 library lacks; declared here where missing, with no CPU kernel, so
#: that only a Meta kernel can serve it.
AMX_PACK_SCHEMA = "convert_weight_packed(Tensor! weight) -> Tensor"


@pytest.fixture
def amx(monkeypatch):
    """vLLM sees AMX tiles (and, where the library lacks them, the AMX build's ops)."""
    from vllm.platforms import current_platform

    current_platform.import_kernels()
    library = None
    if not hasattr(torch.ops._C, "convert_weight_packed"):
        library = torch.library.Library("_C", "FRAGMENT")
        library.define(AMX_PACK_SCHEMA)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)
    _clear_backend_cache()
    yield
    _clear_backend_cache()
    del library  # the declaration stays for the process; harmless without AMX detection


def _clear_backend_cache():
    # vLLM caches the backend it chose per configuration; a choice made with AMX
    # forced must not outlive the test (nor one made before it leak in).
    from vllm.v1.attention.selector import _cached_get_attn_backend

    _cached_get_attn_backend.cache_clear()


def _meta_tree(family: str, **settings):
    from nnterp_widgets import StandardizedVLLM

    return StandardizedVLLM(checkpoint(family), dispatch=False, **{**ENGINE_KWARGS, **settings})


def _mla_impls(model) -> list:
    from vllm.model_executor.layers.attention.mla_attention import MLAAttention

    return [module.impl for module in model._module.modules() if isinstance(module, MLAAttention)]


def test_latent_attention_runs_the_reference_mla_on_an_amx_cpu(amx):
    model = _meta_tree("deepseek_v2")
    impls = _mla_impls(model)
    assert impls and {type(impl).__name__ for impl in impls} == {"CPUMLAImpl"}


def test_amx_mla_is_chosen_where_asked_and_its_meta_build_succeeds(amx):
    # vLLM's own AMX branch (bfloat16): its weights are repacked with
    # convert_weight_packed after loading, on the meta device in the client.
    model = _meta_tree("deepseek_v2", dtype="bfloat16", attention_backend="AMX_MLA")
    impls = _mla_impls(model)
    assert impls and {type(impl).__name__ for impl in impls} == {"AMXMLAImpl"}
    assert all(impl._w_uk_packed.is_meta for impl in impls)


def test_without_the_setting_vllm_would_pick_amx_mla(amx, monkeypatch):
    # What the engine setting is for: left to itself vLLM picks AMX_MLA on this CPU,
    # whatever the dtype (float32 here), though that backend serves bfloat16 only.
    from vllm.v1.attention.backends.mla.amx_mla import AMXMLABackend

    monkeypatch.setattr(platform, "engine_settings", lambda mla, settings: settings)
    model = _meta_tree("deepseek_v3")
    assert {type(impl).__name__ for impl in _mla_impls(model)} == {"AMXMLAImpl"}
    assert torch.float32 not in AMXMLABackend.supported_dtypes


@pytest.mark.parametrize("name", [name for name, family in families().items() if family.engine_error is None])
def test_every_family_builds_on_an_amx_cpu(amx, name):
    # In bfloat16 vLLM takes its AMX branches here: the AMX attention ISA, the AMX MoE
    # experts (isa "amx", other padding, repacked after loading), the packed linear
    # kernels, AMX_MLA where asked for. The tree must come out the same as on AVX2.
    model = _meta_tree(name, dtype="bfloat16")
    assert len(list(model.layers)) == model.num_layers == 2
    assert set(model.support()) >= {"logits", "mlp.mlp_output", "self_attn.attention_output"}


def test_the_engine_setting_is_the_callers_when_given():
    assert platform.engine_settings(False, {"dtype": "float32"}) == {"dtype": "float32"}
    chosen = {"attention_backend": "AMX_MLA"}
    assert platform.engine_settings(True, chosen) == chosen
    configured = {"attention_config": {"backend": "AMX_MLA"}}
    assert platform.engine_settings(True, configured) == configured
    assert platform.engine_settings(True, {})["attention_backend"] == platform.CPU_MLA_BACKEND
