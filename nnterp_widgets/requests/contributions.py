"""Through which tokens the answer was built: the contribution graph, one request.

Ferrando & Voita's information-flow routes. Each block adds to every position's stream
in two steps. The attention step: ``mid[i] = x[i] + sum_j z[i, j] + b``, where
``z[i, j] = sum_h A_h[i, j] * O_h(v_h[j])`` is what position ``j`` sends to position
``i`` (its values through each head's slice of the output projection, weighted by the
pattern) and ``b`` the projection's bias. The MLP step: ``out[i] = mid[i] + mlp[i]``.
A part ``c`` of a sum ``y`` gets the share ``max(0, |y|_1 - |y - c|_1)``, normalised over
the sum's parts: a part close to the whole gets much, a part that cancels gets none
(and where every part is farther from the sum than the sum's own size, as where a
large MLP output cancels the first token's stream, every share is 0)::

    graph = session.contributions("The Eiffel Tower is in the city of").result()
    graph.attention_share(layer=8, query=-1)   # [tokens]: where the last position read from
    kept = graph.graph(threshold=0.04)          # the routes to the last position's prediction
    kept.edges                                  # [(layer, source, target, share, kind), ...]

What it costs: per layer, the pattern of every head (heads x tokens²) and the distance
of every (query, key) part to its sum (tokens² x hidden), computed on the worker in
chunks of queries so its memory stays under `CHUNK_FLOATS` floats. So the time grows
with layers x tokens² x hidden. What it returns is bounded: an attention share is kept
only from `FLOOR` up, and a position's shares sum to at most 1, so at most
``layers x tokens / FLOOR`` edges come back (plus ``4 x layers x tokens`` dense shares).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..engine import module_of
from .attribution import heads_reason, out_projection, per_head
from .common import Tokens
from .common import check_prompt, tokens_of
from .tables import table

#: The smallest attention share returned (the graph view's lowest threshold).
FLOOR = 0.01
#: The paper's threshold for a route; the graph view opens at it.
THRESHOLD = 0.04
#: Floats held at once for one chunk of queries' parts (``chunk x keys x hidden``): 4 MB,
#: small enough to stay in cache while each head's messages are added in place.
CHUNK_FLOATS = 1024 * 1024
#: Why a threshold is refused.
BAD_THRESHOLD = "threshold {value!r}: a share between {floor} (the smallest one returned) and 1"
#: Why a target position is refused.
BAD_TARGET = "target position {value!r}: the prompt has {count} tokens (0 to {last}, or -1 for the last)"


@dataclass(frozen=True)
class Route:
    """The graph kept at one threshold: nodes ``(level, position)`` (level 0 is the
    embedding, level ``l + 1`` the stream after ``layers[l]``) and edges
    ``(layer, source, target, share, kind)`` into level ``layer + 1``: ``kind`` is
    ``"attention"`` (from ``source`` through ``layers[layer]``'s attention) or
    ``"residual"`` (the position's own stream passing the attention step).
    ``mlp[(level, position)]``: the MLP's share of a kept node's stream."""

    threshold: float
    target: int
    nodes: tuple[tuple[int, int], ...]
    edges: tuple[tuple[int, int, int, float, str], ...]
    mlp: dict

    def sources(self, layer: int, target: int) -> list[int]:
        """The positions whose attention edges into ``(layer + 1, target)`` were kept."""
        return [s for l, s, t, _, kind in self.edges if l == layer and t == target and kind == "attention"]


@dataclass(frozen=True)
class Contributions:
    """Every block's shares for every position of one prompt.

    ``edges``: ``[n, 3]`` int32 ``(layer, query, key)`` with ``shares[n]``: the attention
    step's share of ``key``'s message in ``query``'s stream, kept from `FLOOR` up.
    ``[layers, tokens]`` dense shares: ``residual`` (the stream's own part in the
    attention step), ``bias`` (the output projection's bias, 0 without one),
    ``through`` (the attention step's result in the MLP step) and ``mlp``.
    """

    prompt: str
    tokens: Tokens
    edges: np.ndarray
    shares: np.ndarray
    residual: np.ndarray
    bias: np.ndarray
    through: np.ndarray
    mlp: np.ndarray
    floor: float = FLOOR

    @property
    def num_layers(self) -> int:
        return int(self.residual.shape[0])

    def attention_share(self, layer: int, query: int) -> np.ndarray:
        """``[tokens]``: each key's share in ``query``'s attention step at ``layer`` (0 under `floor`)."""
        count = len(self.tokens)
        query = self._position(query)
        row = np.zeros(count)
        pick = (self.edges[:, 0] == layer) & (self.edges[:, 1] == query)
        row[self.edges[pick, 2]] = self.shares[pick]
        return row

    def _position(self, value: int) -> int:
        count = len(self.tokens)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not -count <= value < count:
            raise ValueError(BAD_TARGET.format(value=value, count=count, last=count - 1))
        return int(value) % count

    def graph(self, threshold: float = THRESHOLD, target: int = -1) -> Route:
        """The routes to ``target``'s stream at the top, walking down: a node is kept when
        a kept node above takes at least ``threshold`` of its stream from it.

        Args:
            threshold: the smallest share an edge needs, from `floor` to 1.
            target: the position whose prediction the routes lead to (-1: the last).

        Returns:
            A `Route`.
        """
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not self.floor <= threshold <= 1:
            raise ValueError(BAD_THRESHOLD.format(value=threshold, floor=self.floor))
        target = self._position(target)
        layers = self.num_layers
        by_layer = [self.edges[:, 0] == layer for layer in range(layers)]
        kept = {target}
        nodes = [(layers, target)]
        edges: list[tuple[int, int, int, float, str]] = []
        mlp: dict = {}
        for layer in range(layers - 1, -1, -1):
            below: set[int] = set()
            strong = by_layer[layer] & (self.shares >= threshold)
            for query in sorted(kept):
                mlp[(layer + 1, query)] = float(self.mlp[layer, query])
                if max(self.through[layer, query], self.mlp[layer, query]) < threshold:
                    continue  # neither of the MLP step's parts carries the stream down
                if self.residual[layer, query] >= threshold:
                    edges.append((layer, query, query, float(self.residual[layer, query]), "residual"))
                    below.add(query)
                for index in np.flatnonzero(strong & (self.edges[:, 1] == query)):
                    key = int(self.edges[index, 2])
                    edges.append((layer, key, query, float(self.shares[index]), "attention"))
                    below.add(key)
            kept = below
            nodes.extend((layer, position) for position in sorted(kept))
        return Route(threshold=float(threshold), target=target, nodes=tuple(nodes), edges=tuple(edges), mlp=mlp)

    def to_pandas(self):
        """One row per kept attention edge: ``layer``, ``query``, ``key`` (their token
        texts beside) and the key's ``share`` of the query's attention step."""
        texts = np.array(self.tokens.texts, dtype=object)
        edges = np.asarray(self.edges).reshape(-1, 3)
        return table(
            {
                "layer": edges[:, 0],
                "query": edges[:, 1],
                "key": edges[:, 2],
                "query_token": texts[edges[:, 1]],
                "key_token": texts[edges[:, 2]],
                "share": np.asarray(self.shares),
            }
        )


def proximity_shares(whole: torch.Tensor, parts: torch.Tensor) -> torch.Tensor:
    """Each part's share of its sum: ``max(0, |y|_1 - |y - c|_1)`` normalised over the
    parts. ``whole`` ``[..., hidden]``, ``parts`` ``[..., count, hidden]`` -> ``[..., count]``."""
    size = whole.abs().sum(-1, keepdim=True)
    proximity = (size - (whole.unsqueeze(-2) - parts).abs().sum(-1)).clamp_min(0)
    return proximity / proximity.sum(-1, keepdim=True).clamp_min(torch.finfo(proximity.dtype).tiny)


def block_shares(
    stream: torch.Tensor,
    attention: torch.Tensor,
    messages: torch.Tensor,
    pattern: torch.Tensor,
    bias: torch.Tensor,
    mlp: torch.Tensor,
    floor: float,
) -> dict:
    """One block's shares. ``stream``/``attention``/``mlp`` ``[tokens, hidden]``;
    ``messages`` ``[tokens, heads, hidden]`` (each key's values through each head's
    slice); ``pattern`` ``[heads, query, key]``; ``bias`` ``[hidden]``.

    The distance of each (query, key) part to its query's sum is computed in place, a
    few queries at a time (`CHUNK_FLOATS`), and only for the keys a query can read."""
    tokens, hidden = stream.shape
    heads = pattern.shape[0]
    mid = stream + attention
    size = mid.abs().sum(-1)  # |y|_1 per query

    def proximity(distance: torch.Tensor, norm: torch.Tensor) -> torch.Tensor:
        return (norm - distance).clamp_min(0)

    residual = proximity((mid - stream).abs().sum(-1), size)
    bias_part = proximity((mid - bias).abs().sum(-1), size)
    kept_rows, kept_shares = [], []
    residual_share, bias_share = torch.empty_like(residual), torch.empty_like(residual)
    start = 0
    while start < tokens:
        keys = max(start + 1, math.isqrt(CHUNK_FLOATS // hidden))  # about the chunk's widest row
        chunk = max(1, CHUNK_FLOATS // (keys * hidden))
        stop = min(tokens, start + chunk)
        # -y, then plus each head's weighted messages: the part's distance to the sum.
        sent = mid[start:stop, None].expand(-1, stop, -1).neg()
        for head in range(heads):
            sent.addcmul_(pattern[head, start:stop, :stop, None], messages[None, :stop, head])
        keys = proximity(sent.abs_().sum(-1), size[start:stop, None])  # [chunk, keys]
        total = keys.sum(-1) + residual[start:stop] + bias_part[start:stop]
        total = total.clamp_min(torch.finfo(total.dtype).tiny)  # parts that all cancel: shares 0
        keys = keys / total[:, None]
        residual_share[start:stop] = residual[start:stop] / total
        bias_share[start:stop] = bias_part[start:stop] / total
        where = (keys >= floor).nonzero()
        kept_rows.append(torch.stack([where[:, 0] + start, where[:, 1]], dim=1))
        kept_shares.append(keys[where[:, 0], where[:, 1]])
        start = stop
    out = stream + attention + mlp
    step = proximity_shares(out, torch.stack([mid, mlp], dim=1))
    return {
        "pairs": torch.cat(kept_rows).to(torch.int32),
        "shares": torch.cat(kept_shares).float(),
        "residual": residual_share,
        "bias": bias_share,
        "through": step[:, 0],
        "mlp": step[:, 1],
    }


def messages_of(projection: torch.nn.Module, values: torch.Tensor, heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``values`` ``[kv_heads, tokens, head_dim]`` -> each key's message per head through
    the output projection ``[tokens, heads, hidden]``, and the projection's bias: `per_head`
    on a chunk of positions at a time (its rows are ``heads²`` per position)."""
    kv_heads, tokens, size = values.shape
    per_kv = values.repeat_interleave(heads // kv_heads, dim=0).transpose(0, 1)  # [tokens, heads, head_dim]
    chunk = max(1, CHUNK_FLOATS // (4 * heads * heads * size))
    out, bias = [], None
    for start in range(0, tokens, chunk):
        sent, bias = per_head(projection, per_kv[start : start + chunk])
        out.append(sent)
    return torch.cat(out), bias


def all_shares(model, floor: float, out: dict) -> None:
    """Inside a trace: every block's shares on the prefill, reduced on the worker."""
    heads = model.num_heads
    found = {k: [] for k in ("layer", "pairs", "shares", "residual", "bias", "through", "mlp")}
    for index, layer in enumerate(model.layers):
        attention = layer.self_attn
        stream = layer.layer_input[0].float()
        pattern = attention.attention_probabilities[0].float()
        values = attention.attention_values[0]  # in the projection's dtype
        sent = attention.attention_output[0].float()
        mlp = layer.mlp.mlp_output[0].float()
        messages, bias = messages_of(out_projection(module_of(attention)), values, heads)
        block = block_shares(stream, sent, messages, pattern, bias.float(), mlp, floor)
        found["layer"].append(torch.full((len(block["shares"]),), index, dtype=torch.int32))
        for name in ("pairs", "shares", "residual", "bias", "through", "mlp"):
            found[name].append(block[name].cpu())
    out["edges"] = torch.cat([torch.cat(found["layer"])[:, None], torch.cat(found["pairs"])], dim=1)
    out["shares"] = torch.cat(found["shares"])
    for name in ("residual", "bias", "through", "mlp"):
        out[name] = torch.stack(found[name])


def contributions(model, prompt: str, floor: float = FLOOR) -> Contributions:
    """One request: every block's contribution shares on the prompt's prefill.

    Args:
        model: the `StandardizedVLLM`.
        prompt: the prompt.
        floor: the smallest attention share returned (bounds what comes back).

    Returns:
        `Contributions`; `Contributions.graph` keeps the routes above a threshold.

    Raises:
        InterventionError: where the family's heads cannot be split (the reason).
    """
    from .sites import InterventionError

    ids = check_prompt(model, prompt)
    if isinstance(floor, bool) or not isinstance(floor, (int, float)) or not 0 < floor <= 1:
        raise InterventionError(f"floor {floor!r}: a share above 0 and at most 1")
    reason = heads_reason(model)
    if reason is not None:
        raise InterventionError(f"the contribution graph needs each head's messages: {reason}")
    reader = model.reader()
    with model.trace(ids, temperature=0.0, max_tokens=1):
        out = dict().save()
        out["input_ids"] = reader.input_ids[0].cpu()
        all_shares(reader, float(floor), out)
    return Contributions(
        prompt=prompt,
        tokens=tokens_of(model, out["input_ids"]),
        edges=_frozen(out["edges"].numpy().astype(np.int32)),
        shares=_frozen(out["shares"].numpy().astype(np.float32)),
        residual=_frozen(out["residual"].numpy()),
        bias=_frozen(out["bias"].numpy()),
        through=_frozen(out["through"].numpy()),
        mlp=_frozen(out["mlp"].numpy()),
        floor=float(floor),
    )


def _frozen(array: np.ndarray) -> np.ndarray:
    array = np.ascontiguousarray(array)
    array.setflags(write=False)
    return array
