"""`Family`: what one vLLM implementation is called and what it can serve."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

from .tiny import TinySpec
from ...components.vllm.attention import Attention
from ...components.vllm.layer import FusedLayer, Layer
from ...components.vllm.mlp import GatedMLP
from ...components.vllm.transformers_backend import TransformersLayer
from .testing import HFNames

#: Where a family's modules come from.
NATIVE = "native"
#: vLLM has no implementation of its own and runs transformers' modules
#: (`TransformersForCausalLM`, see `components.vllm.transformers_backend`).
TRANSFORMERS = "transformers"

#: CPU instruction sets a family's engine tests ran on (`Family.verified_on`).
AVX2 = "AVX2"
AMX = "AVX-512+AMX"
#: One NVIDIA H200 on CUDA vLLM 0.26, float32 held to transformers at 1e-4 (docs/gpu.md).
H200 = "H200 (CUDA vLLM 0.26)"


@dataclass(frozen=True)
class Family:
    """One vLLM model implementation, as the standardized engine sees it.

    Paths are vLLM's native module paths under the model (``model.layers``).
    """

    model_type: str
    layers: str = "model.layers"
    embed: str = "model.embed_tokens"
    norm: str = "model.norm"
    #: Native names of a block's attention and MLP.
    attention: str = "self_attn"
    mlp: str = "mlp"
    layer_cls: type[Layer] = FusedLayer
    attention_cls: type = Attention
    mlp_cls: type = GatedMLP
    #: Native path of the head whose weight the logits processor projects with.
    lm_head: str = "lm_head"
    #: Whether the head has a bias the logits processor adds (GPT-J, Phi).
    head_bias: bool = False
    #: Per-block class overrides, native path key -> class, tried before the general
    #: ones (DeepSeek's first dense MLP among routed ones).
    overrides: dict[str, type] = field(default_factory=dict)
    #: Overrides that depend on the checkpoint: ``config -> {path key: class}``
    #: (which blocks of a mixture of experts are dense is a config field).
    block_overrides: Callable[[Any], dict[str, type]] | None = None
    #: Extra ``rename`` entries (e.g. a module class -> "self_attn").
    extra_rename: Callable[[], dict] | None = None
    #: Reads a size the transformers config spells its own way.
    sizes: dict[str, Callable[[Any], int]] = field(default_factory=dict)
    #: `NATIVE` (vLLM's own implementation) or `TRANSFORMERS` (its Transformers backend).
    backend: str = NATIVE
    #: vLLM's class for this model_type, as the docs name it.
    vllm_class: str = ""
    #: Whether vLLM runs the attention as multi-head latent attention (MLA), whose CPU
    #: backend the engine chooses (`engine.platform.CPU_MLA_BACKEND`).
    mla: bool = False
    #: The engine's own error where vLLM cannot run this family at all; ``None`` if it runs.
    engine_error: str | None = None
    notes: str = ""

    # -- what its tests need ---------------------------------------------------
    #: The tiny checkpoint the tests and the survey run it on.
    checkpoint: TinySpec | None = None
    #: Where transformers keeps its values, for the reference the tests hold it to.
    reference: HFNames | None = None
    #: ``torch.testing.assert_close`` tolerances where float32 rounding needs more than
    #: the tests' default (the family says why); ``None``: the default.
    tolerance: dict[str, float] | None = None
    #: Where its engine checks passed: CPU instruction sets (`AVX2`, `AMX`; the AMX path
    #: of every family is also built, not run, by ``tests/test_cpu_features.py``) and
    #: GPUs (`H200`: tools/gpu_families.py, docs/gpu.md).
    verified_on: tuple[str, ...] = (AVX2,)

    @property
    def convention(self) -> str:
        return self.layer_cls.CONVENTION

    def rename(self) -> dict:
        names: dict = {}

        def add(key, alias):
            if key in names:
                known = names[key]
                names[key] = [*([known] if isinstance(known, str) else known), alias]
            else:
                names[key] = alias

        add(self.embed, "embed_tokens")
        add(self.layers, "layers")
        add(self.norm, "norm")
        if self.lm_head != "lm_head":
            # Gemma-2's logits processor projects with the embedding itself: one
            # module, two standard names.
            add(self.lm_head, "lm_head")
        if self.attention != "self_attn" and self.extra_rename is None:
            add(self.attention, "self_attn")
        if self.mlp != "mlp":
            add(self.mlp, "mlp")
        if self.extra_rename is not None:
            for key, alias in self.extra_rename().items():
                add(key, alias)
        return names

    def envoys(self, config: Any = None) -> dict:
        """The ``envoys=`` map: per-block overrides first, then the general classes."""
        per_block = self.block_overrides(config) if (self.block_overrides and config is not None) else {}
        return {
            **self.overrides,
            **per_block,
            f"{self.layers}.*": self.layer_cls,
            f"{self.layers}.*.{self.attention}": self.attention_cls,
            f"{self.layers}.*.{self.mlp}": self.mlp_cls,
        }

    def unavailable(self, step: int | None = None) -> dict[str, str]:
        """Block value name (``mlp.mlp_activation``) -> reason, for this family.

        A value some block cannot serve is listed (a per-block override that serves
        more, DeepSeek's dense first MLP, is shown per block in the module tree).
        ``step``: a generation step; on a decode step (1 on) the values a block serves
        on the prefill only are listed too, with their reason.
        """
        found = {}
        for prefix, cls in (("", self.layer_cls), ("self_attn.", self.attention_cls), ("mlp.", self.mlp_cls)):
            if step is not None and step > 0:
                for name, reason in getattr(cls, "ON_DECODE", {}).items():
                    found[prefix + name] = reason
            for name, reason in cls.UNAVAILABLE.items():  # never served wins over prefill-only
                found[prefix + name] = reason
        return found


def on_transformers_backend(model_type: str, **fields: Any) -> Family:
    """A `Family` that vLLM runs on its Transformers backend: transformers' own decoder
    layers inside `TransformersForCausalLM`, whose blocks keep a batch axis
    (`TransformersLayer`). ``fields``: the rest of the `Family`."""
    return Family(
        model_type,
        backend=TRANSFORMERS,
        vllm_class="TransformersForCausalLM",
        layer_cls=TransformersLayer,
        **fields,
    )


def attention_by_class(module: str, name: str, *, gone_ok: bool = False) -> Callable[[], dict]:
    """An ``extra_rename`` for a family whose attention module is named ``attn``, as is the
    vLLM ``Attention`` inside it: a name key would alias both, so the family's attention
    class (``name`` in vLLM's ``module``) becomes ``self_attn`` instead.

    Args:
        module: the vLLM model module (``vllm.model_executor.models.gpt2``).
        name: its attention class (``GPT2Attention``).
        gone_ok: nothing to alias where this vLLM has no such class (a removed model).
    """

    def rename() -> dict:
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            if gone_ok:
                return {}
            raise
        return {cls: "self_attn"}

    return rename
