"""Where an intervention acts, checked: the sites a sweep patches, the heads a request
ablates, and their ablation inside a trace.

Shared by every request that ablates or patches (the prompt's, the patching sweep, the
attribution), so none imports another for it::

    heads = check_heads(model, [(3, 1), (5, 0)])     # before the trace: clear errors
    with model.trace(text, temperature=0.0, max_tokens=1):
        ablate_heads(model, heads)                    # before any read at those layers
        probs = model.next_token_probs.save()
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..engine import edit_in_place
from .tables import table


#: Where a sweep patches, and what its map's columns are.
POSITION_SITES = ("layer_output", "attention_output", "mlp_output")


HEAD_SITES = ("attention_head_outputs",)


SITES = POSITION_SITES + HEAD_SITES


HEADS_NOT_PAIRS = "ablate takes (layer, head) pairs of integers, got {item!r}"


LAYER_OUT_OF_RANGE = "layer {layer} is out of range: this model has layers 0..{last}"


HEAD_OUT_OF_RANGE = "head {head} is out of range: each layer has heads 0..{last}"


UNKNOWN_SITE = "unknown site {site!r}; the sites are {sites}"


SITE_UNAVAILABLE = "{site} is not available on this model: {reason}"


SITE_HOST = {
    "layer_output": "",
    "attention_output": "self_attn",
    "mlp_output": "mlp",
    "attention_head_outputs": "self_attn",
}


class InterventionError(ValueError):
    """An intervention the engine cannot run as asked: said before any request."""


POSITIONS = (
    "positions are token positions of the prompt, a non-empty list of distinct integers in 0..{last} "
    "(or -{count}..-1 from the end); got {got!r}"
)


def check_positions(positions, count: int) -> tuple[int, ...]:
    """``positions`` (``None``: all) as sorted, distinct positions in ``0..count-1``;
    negative ones count from the end."""
    if positions is None:
        return tuple(range(count))
    try:
        items = list(positions)
    except TypeError:
        raise InterventionError(POSITIONS.format(last=count - 1, count=count, got=positions)) from None
    chosen = set()
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (int, np.integer)) or not -count <= int(item) < count:
            raise InterventionError(POSITIONS.format(last=count - 1, count=count, got=item))
        chosen.add(int(item) % count)
    if not chosen or len(chosen) != len(items):
        raise InterventionError(POSITIONS.format(last=count - 1, count=count, got=positions))
    return tuple(sorted(chosen))


def check_heads(model, heads) -> tuple[tuple[int, int], ...]:
    """``heads`` as sorted, distinct ``(layer, head)`` pairs; `InterventionError` if any
    is not a pair of ints or is out of range, or the model serves no head outputs."""
    chosen = set()
    for item in heads:
        if (
            not isinstance(item, (tuple, list))
            or len(item) != 2
            or not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in item)
        ):
            raise InterventionError(HEADS_NOT_PAIRS.format(item=item))
        layer, head = int(item[0]), int(item[1])
        if not 0 <= layer < model.num_layers:
            raise InterventionError(LAYER_OUT_OF_RANGE.format(layer=layer, last=model.num_layers - 1))
        if not 0 <= head < model.num_heads:
            raise InterventionError(HEAD_OUT_OF_RANGE.format(head=head, last=model.num_heads - 1))
        chosen.add((layer, head))
    if chosen:
        check_site(model, "attention_head_outputs")
    return tuple(sorted(chosen))


def check_site(model, site: str) -> None:
    if site not in SITES:
        raise InterventionError(UNKNOWN_SITE.format(site=site, sites=", ".join(SITES)))
    for layer in model.layers:
        host = getattr(layer, SITE_HOST[site]) if SITE_HOST[site] else layer
        reason = host.unavailable_reason(site)
        if reason is not None:
            raise InterventionError(SITE_UNAVAILABLE.format(site=site, reason=reason))


def ablate_heads(model, heads, layer: int | None = None) -> None:
    """Zero the listed heads' contributions (their slice of ``attention_head_outputs``).

    Call inside an invoke, with ``heads`` checked by `check_heads`, before the trace
    reads anything at or after the first ablated layer's head outputs; or per layer
    (``layer=i``) just before reading layer ``i``'s head outputs.

    In place (`edit_in_place`): the request's own rows are zeroed where the run holds
    them, where nnsight's write-back would splice a new copy of the step's whole slab.
    """
    by_layer: dict[int, list[int]] = {}
    for index, head in heads:
        by_layer.setdefault(int(index), []).append(int(head))
    for index in sorted(by_layer):
        if layer is None or index == layer:
            chosen = by_layer[index]

            def zero(outputs, chosen=chosen):
                outputs[:, :, chosen] = 0

            edit_in_place(model.layers[index].self_attn, "attention_head_outputs", zero)


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

    def to_pandas(self):
        """One row per token of the clean run's top-k: ``rank``, ``id``, probability
        ``clean`` and ``ablated``, and ``delta``."""
        return table(
            {
                "rank": np.arange(len(self.ids)),
                "id": self.ids,
                "clean": self.clean,
                "ablated": self.ablated,
                "delta": self.delta,
            }
        )


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
