"""The interventions' data: plain immutable objects, checked when built.

`PatchResult` is an activation-patching sweep, `AblationDelta` a head ablation against
the clean run, `PairLens` two prompts' logit lens side by side. Arrays are numpy; token
text is data (a figure escapes it, never interprets it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .panels import LensPanel, Tokens

#: Where a sweep patches, and what its map's columns are.
POSITION_SITES = ("layer_output", "attention_output", "mlp_output")
HEAD_SITES = ("attention_head_outputs",)
SITES = POSITION_SITES + HEAD_SITES


def normalized_effect(patched: np.ndarray, clean: float, corrupted: float) -> np.ndarray:
    """``(patched - corrupted) / (clean - corrupted)``: 1 where a patch restores the clean
    metric, 0 where it changes nothing. float64, so a float32 metric loses nothing."""
    patched = np.asarray(patched, dtype=np.float64)
    return (patched - np.float64(corrupted)) / (np.float64(clean) - np.float64(corrupted))


@dataclass(frozen=True)
class PatchResult:
    """One sweep: the clean run's value at ``site`` patched into the corrupted run, one
    cell at a time.

    ``patched[layer, column]`` is the metric, logit(answer) - logit(foil) at the last
    position, of the corrupted run with that cell patched; a column is a position, or a
    head for ``attention_head_outputs`` (all positions of that head). ``clean_metric``
    and ``corrupted_metric`` come from the request that read the clean values, so
    `effect` is exactly 1 and 0 at them. ``requests``: engine requests (traces) the
    sweep took.
    """

    site: str
    clean: Tokens
    corrupted: Tokens
    answer: int
    foil: int
    answer_text: str
    foil_text: str
    clean_metric: float
    corrupted_metric: float
    patched: np.ndarray
    requests: int

    def __post_init__(self) -> None:
        if self.site not in SITES:
            raise ValueError(f"unknown site {self.site!r}; the sites are {', '.join(SITES)}")
        if len(self.clean) != len(self.corrupted):
            raise ValueError(
                f"the clean prompt has {len(self.clean)} tokens and the corrupted one {len(self.corrupted)}"
            )
        patched = np.asarray(self.patched)
        if patched.ndim != 2 or patched.shape[0] < 1:
            raise ValueError(f"patched must be [layers, columns], got shape {patched.shape}")
        if self.site in POSITION_SITES and patched.shape[1] != len(self.clean):
            raise ValueError(f"patched has {patched.shape[1]} columns for {len(self.clean)} positions")
        if not np.isfinite(patched).all():
            raise ValueError("patched holds a value that is not finite")
        if self.clean_metric == self.corrupted_metric:
            raise ValueError("the clean and corrupted metrics are equal: the effect is undefined")
        object.__setattr__(self, "patched", np.ascontiguousarray(patched, dtype=np.float32))

    @property
    def per_head(self) -> bool:
        return self.site in HEAD_SITES

    @property
    def num_layers(self) -> int:
        return int(self.patched.shape[0])

    @property
    def effect(self) -> np.ndarray:
        """``[layers, columns]`` float64: (patched - corrupted) / (clean - corrupted)."""
        return normalized_effect(self.patched, self.clean_metric, self.corrupted_metric)

    @property
    def end_points(self) -> tuple[float, float]:
        """The effect of the clean and of the corrupted run: 1.0 and 0.0."""
        ends = normalized_effect(
            np.array([self.clean_metric, self.corrupted_metric]), self.clean_metric, self.corrupted_metric
        )
        return float(ends[0]), float(ends[1])

    def column_labels(self) -> list[str]:
        """Raw text per column: the clean prompt's tokens (a figure escapes them), or heads."""
        if self.per_head:
            return [f"head {h}" for h in range(self.patched.shape[1])]
        return list(self.clean.texts)


@dataclass(frozen=True)
class AblationDelta:
    """An ablated run against the clean one, at the last position.

    ``ids`` are the clean run's top-k, best first; ``clean`` / ``ablated`` their
    probabilities in each run; ``ablated_ids`` the ablated run's own top-k.
    """

    heads: tuple[tuple[int, int], ...]
    ids: np.ndarray
    clean: np.ndarray
    ablated: np.ndarray
    ablated_ids: np.ndarray

    def __post_init__(self) -> None:
        shapes = {np.shape(self.ids), np.shape(self.clean), np.shape(self.ablated), np.shape(self.ablated_ids)}
        if len(shapes) != 1 or len(np.shape(self.ids)) != 1:
            raise ValueError(f"ids, clean, ablated and ablated_ids must be [k] alike, got {sorted(shapes)}")

    @property
    def delta(self) -> np.ndarray:
        """ablated - clean probability of each of the clean top-k (float32)."""
        return np.asarray(self.ablated, np.float32) - np.asarray(self.clean, np.float32)

    @property
    def top1_delta(self) -> float:
        """Δ probability of the clean top-1."""
        return float(self.delta[0])


def ablation_delta(clean_probs, ablated_probs, heads=(), k: int = 5) -> AblationDelta:
    """`AblationDelta` from the two runs' next-token probabilities (``[vocab]``, any of
    numpy / torch / list)."""
    clean = np.asarray(clean_probs, dtype=np.float32).reshape(-1)
    ablated = np.asarray(ablated_probs, dtype=np.float32).reshape(-1)
    if clean.shape != ablated.shape:
        raise ValueError(f"the two runs' probabilities differ in shape: {clean.shape} and {ablated.shape}")
    k = min(k, clean.size)
    ids = np.argsort(-clean, kind="stable")[:k]
    ablated_ids = np.argsort(-ablated, kind="stable")[:k]
    return AblationDelta(
        tuple((int(l), int(h)) for l, h in heads),
        ids.astype(np.int64),
        clean[ids],
        ablated[ids],
        ablated_ids.astype(np.int64),
    )


@dataclass(frozen=True)
class PairLens:
    """Two prompts of one token count, the lens of each and their difference.

    ``first_diff`` / ``second_diff`` are ``[layers, positions]``: the lens's
    logit(answer) - logit(foil) (``project_on_vocab`` of each layer's output);
    `difference` is first - second.
    """

    first: LensPanel
    second: LensPanel
    answer: int
    foil: int
    answer_text: str
    foil_text: str
    first_diff: np.ndarray
    second_diff: np.ndarray

    def __post_init__(self) -> None:
        want = self.first.top_ids.shape[:2]
        for name in ("first_diff", "second_diff"):
            value = np.asarray(getattr(self, name), dtype=np.float32)
            if value.shape != want:
                raise ValueError(f"{name} is {value.shape}, expected [layers, positions] {want}")
            object.__setattr__(self, name, value)
        if self.second.top_ids.shape[:2] != want:
            raise ValueError(f"the two lenses differ in shape: {want} and {self.second.top_ids.shape[:2]}")

    @property
    def difference(self) -> np.ndarray:
        return self.first_diff - self.second_diff
