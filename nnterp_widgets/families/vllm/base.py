"""`Family`: what one vLLM implementation is called and what it can serve."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ...components.vllm.attention import Attention
from ...components.vllm.layer import FusedLayer, Layer
from ...components.vllm.mlp import GatedMLP, MLP


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
    attention_cls: type[Attention] = Attention
    mlp_cls: type = GatedMLP
    #: Extra ``rename`` entries (e.g. a module class -> "self_attn").
    extra_rename: Callable[[], dict] | None = None
    #: Reads a size the transformers config spells its own way.
    sizes: dict[str, Callable[[Any], int]] = field(default_factory=dict)
    notes: str = ""

    @property
    def convention(self) -> str:
        return "fused pair" if issubclass(self.layer_cls, FusedLayer) else "plain stream"

    def rename(self) -> dict:
        names = {self.embed: "embed_tokens", self.layers: "layers", self.norm: "norm"}
        if self.extra_rename is not None:
            names.update(self.extra_rename())
        return names

    def envoys(self) -> dict:
        return {
            f"{self.layers}.*": self.layer_cls,
            f"{self.layers}.*.{self.attention}": self.attention_cls,
            f"{self.layers}.*.{self.mlp}": self.mlp_cls,
        }

    def unavailable(self) -> dict[str, str]:
        """Block value name (``mlp.mlp_activation``) -> reason, for this family."""
        found = {}
        for prefix, cls in (("", self.layer_cls), ("self_attn.", self.attention_cls), ("mlp.", self.mlp_cls)):
            for name, reason in cls.UNAVAILABLE.items():
                found[prefix + name] = reason
        return found
