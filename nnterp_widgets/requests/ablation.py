"""Heads zeroed against the clean run: `AblationDelta` and its request, `ablation`.

delta = ablation(model, "The Eiffel Tower is in the city of", [(5, 0), (7, 2)])
delta.clean_top, delta.ablated_probs      # the clean top-k in both runs
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .common import ONE_GREEDY_STEP, check_prompt
from .sites import ablate_heads, check_heads


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


def ablation(model, text: str, heads, k: int = 5) -> AblationDelta:
    """One request, two invokes (clean, ablated): the ablated run against the clean one."""
    check_prompt(model, text)
    chosen = check_heads(model, heads)
    with model.trace(**ONE_GREEDY_STEP) as tracer:
        out = dict().save()
        with tracer.invoke(text):
            out["clean"] = model.next_token_probs[0]
        with tracer.invoke(text):
            ablate_heads(model, chosen)
            out["ablated"] = model.next_token_probs[0]
    return ablation_delta(out["clean"].float().cpu(), out["ablated"].float().cpu(), chosen, k)
