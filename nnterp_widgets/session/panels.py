"""The panels' data: plain immutable objects built from one prompt's engine request.

Each panel renders one of these and nothing else, so every number a widget shows can
be tested here without a browser. Arrays are numpy; token text is data (a widget
renders it as text, never as markup).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Tokens:
    """A prompt's tokens: ids and their decoded text, one entry per position."""

    ids: tuple[int, ...]
    texts: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.ids)

    def labels(self) -> list[str]:
        """One label per position, distinct even where the text repeats (``"in·4"``)."""
        return [f"{text}·{index}" for index, text in enumerate(self.texts)]


@dataclass(frozen=True)
class ValueSummary:
    """One standard value for the current prompt, as the module tree shows it.

    ``preview`` is a small ``[rows, cols]`` float32 slice with token positions on the
    rows (``row_tokens`` says which), enough to see a value without shipping it whole.
    """

    id: str
    shape: tuple[int, ...]
    dtype: str
    stats: dict
    preview: np.ndarray
    row_tokens: tuple[int, ...]
    total_cols: int


@dataclass(frozen=True)
class LensPanel:
    """The logit lens: per layer and position, the top-k of ``project_on_vocab``.

    ``top_ids`` / ``top_probs`` are ``[layers, positions, k]``; ``top_texts`` the
    tokens' text. ``model_top_ids`` / ``model_top_probs`` are the model's own
    prediction (its logits) at the last position, which the last row's last cell
    equals.
    """

    tokens: Tokens
    top_ids: np.ndarray
    top_probs: np.ndarray
    top_texts: tuple[tuple[tuple[str, ...], ...], ...]
    model_top_ids: np.ndarray
    model_top_probs: np.ndarray

    @property
    def num_layers(self) -> int:
        return int(self.top_ids.shape[0])

    @property
    def layer_labels(self) -> list[str]:
        return [f"layers[{i}]" for i in range(self.num_layers)]

    def top1_probs(self) -> np.ndarray:
        """``[layers, positions]``: the colour of each cell."""
        return self.top_probs[..., 0]

    def top1_texts(self) -> list[list[str]]:
        return [[cell[0] for cell in row] for row in self.top_texts]


@dataclass(frozen=True)
class AttentionPanel:
    """One layer's prefill ``attention_probabilities``: ``pattern`` is ``[heads, query, key]``."""

    tokens: Tokens
    layer: int
    num_layers: int
    pattern: np.ndarray

    @property
    def num_heads(self) -> int:
        return int(self.pattern.shape[0])

    def head(self, index: int) -> np.ndarray:
        if not 0 <= index < self.num_heads:
            raise IndexError(f"head {index} is out of range: layer {self.layer} has heads 0..{self.num_heads - 1}")
        return self.pattern[index]

    def to_bytes(self) -> bytes:
        """The pattern as little-endian float32, row-major, for a binary message."""
        return np.ascontiguousarray(self.pattern, dtype="<f4").tobytes()


@dataclass(frozen=True)
class PromptResult:
    """Everything one engine request for a prompt gave: it feeds every panel."""

    prompt: str
    tokens: Tokens
    lens: LensPanel
    #: Layer -> ``[heads, query, key]`` float32; empty where the family has no pattern.
    patterns: dict = field(default_factory=dict)
    #: Value id (``model.model.layers.0.mlp.mlp_output``) -> summary.
    values: dict = field(default_factory=dict)

    def attention(self, layer: int) -> AttentionPanel:
        if layer not in self.patterns:
            known = sorted(self.patterns)
            span = f"layers {known[0]}..{known[-1]}" if known else "no layers"
            raise IndexError(f"no attention pattern for layer {layer}; this prompt has {span}")
        return AttentionPanel(self.tokens, layer, len(self.lens.top_ids), self.patterns[layer])
