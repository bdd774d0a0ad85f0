"""What each attention head does on a prompt, in one request: `HeadRoles`.

A trained model's heads have roles that show in their patterns: a previous-token head
puts its weight on the token just before the query, a sink head on the first token.
`head_roles` reads every layer's prefill pattern in one trace and reduces each head to
a few numbers in the worker (no pattern leaves it), so the tour and the head grid can
find such heads on any prompt instead of naming them by hand::

    roles = session.head_roles("The Eiffel Tower is in the city of Paris.").result()
    layer, head = roles.best("previous")     # the strongest previous-token head
    roles.scores["first"].mean()             # how much weight the first token takes
    roles.top("induction", 3)                # [((layer, head), score), ...], best first

The induction role needs a prompt that repeats itself: `induction_probe` is a random
sequence of tokens twice (token ids, which every request takes as a prompt).
"""

from __future__ import annotations

from typing import Any

from dataclasses import dataclass

import numpy as np
import torch

from .question import Question
from .common import RequestRefused, Tokens, check_prompt, crossing, prompt_key, tokens_of
from .attention import pattern_layers
from .tables import cells, stacked

#: A head's roles, each the mean of one kind of weight over the prompt's queries.
#: ``previous``: on the token just before the query (queries from position 2, so that
#: the first token's own pull does not count as a previous-token head's);
#: ``first``: on the first token (queries from position 1); ``current``: on itself;
#: ``induction``: from each token whose token appeared earlier, on the token after that
#: earlier occurrence (Olsson et al.'s induction heads; NaN where nothing repeats).
ROLES = ("previous", "first", "current", "induction")
#: Queries each role reads from: the first position attends only to itself, and
#: position 1's previous token is the first token.
ROLE_START = {"previous": 2, "first": 1, "current": 1}
TOO_SHORT = "finding heads' roles needs a prompt of at least 3 tokens; {text!r} is {count}"


@dataclass(frozen=True)
class HeadRoles:
    """Each head's mean weight on the previous token, the first token and itself.

    ``scores[role]`` is ``[layers, heads]`` float32 (NaN where a layer serves no
    pattern); 1.0 is a head that always attends there, and a head that spreads its
    weight evenly over ``n`` keys scores about ``1/n``.
    """

    prompt: str
    tokens: Tokens
    scores: dict

    def best(self, role: str) -> tuple[int, int]:
        """The ``(layer, head)`` with the highest score for ``role`` (one of `ROLES`)."""
        return self.top(role, 1)[0][0]

    def top(self, role: str, k: int = 5) -> list[tuple[tuple[int, int], float]]:
        """The ``k`` heads with the highest score for ``role``: ``[((layer, head), score), ...]``,
        best first (heads without a score left out)."""
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; the roles are {', '.join(ROLES)}")
        grid = self.scores[role]
        order = [
            i
            for i in np.argsort(-np.nan_to_num(grid, nan=-np.inf), axis=None, kind="stable")
            if np.isfinite(grid.flat[i])
        ]
        return [((int(i) // grid.shape[1], int(i) % grid.shape[1]), float(grid.flat[i])) for i in order[: int(k)]]

    def score(self, role: str, layer: int, head: int) -> float:
        return float(self.scores[role][layer, head])

    def to_pandas(self):
        """One row per (role, layer, head): its ``score`` (NaN where a role has none there)."""
        frames = {
            role: cells({"layer": range(np.shape(s)[0]), "head": range(np.shape(s)[1])}, {"score": s})
            for role, s in self.scores.items()
        }
        return stacked(frames, "role")[["role", "layer", "head", "score"]]


def induction_pairs(ids: list[int]) -> tuple[list[int], list[int]]:
    """``(queries, keys)``: each position whose token appeared earlier, and the position
    after that token's latest earlier occurrence (where that is before the query)."""
    seen: dict[int, int] = {}
    queries, keys = [], []
    for position, token in enumerate(ids):
        earlier = seen.get(token)
        if earlier is not None and earlier + 1 < position:
            queries.append(position)
            keys.append(earlier + 1)
        seen[token] = position
    return queries, keys


def role_scores(probabilities: torch.Tensor, queries: list[int], keys: list[int]) -> np.ndarray:
    """``[1, heads, q, k]`` probabilities -> ``[roles, heads]`` (the order of `ROLES`);
    ``queries`` / ``keys``: the induction pairs (`induction_pairs`)."""
    pattern = probabilities[0].float()
    count = pattern.shape[-1]
    positions = torch.arange(count, device=pattern.device)
    previous = pattern[:, positions[2:], positions[2:] - 1].mean(-1)
    first = pattern[:, 1:, 0].mean(-1)
    current = pattern[:, positions[1:], positions[1:]].mean(-1)
    if queries:
        induction = pattern[:, queries, keys].mean(-1)
    else:
        induction = torch.full_like(first, float("nan"))
    return crossing(torch.stack([previous, first, current, induction]))


def induction_probe(model, length: int = 50, seed: int = 0) -> list[int]:
    """The token ids of a random sequence of ``length`` tokens, twice: on its second half
    an induction head attends to the token after the current one's first occurrence.
    Special tokens are left out; the same seed gives the same sequence."""
    if isinstance(length, bool) or not isinstance(length, int) or length < 2:
        raise RequestRefused(f"length is the repeated sequence's token count, at least 2; got {length!r}")
    special = set(getattr(model.tokenizer, "all_special_ids", []) or [])
    generator = np.random.default_rng(seed)
    pool = np.array([i for i in range(model.vocab_size) if i not in special])
    half = generator.choice(pool, size=length, replace=False).tolist()
    return half + half


def roles_plan(model, prompt: Any) -> tuple[list[int], tuple, tuple]:
    """The head roles' checks, before any trace: ``(ids, reads_args, build_args)`` for
    `roles_reads` and `roles_result`."""
    ids = check_prompt(model, prompt)
    if len(ids) < 3:
        raise RequestRefused(TOO_SHORT.format(text=prompt, count=len(ids)))
    queries, keys = induction_pairs(ids)
    return ids, (pattern_layers(model), queries, keys), (prompt,)


def roles_reads(model, layers, queries: list[int], keys: list[int]) -> dict:
    """Inside the prompt's invoke: the ids and each served layer's role scores."""
    out = {"input_ids": crossing(model.input_ids[0])}
    for index in layers:
        out[index] = role_scores(model.layers[index].self_attn.attention_probabilities, queries, keys)
    return out


def roles_result(model, ids, out: dict, prompt) -> HeadRoles:
    """`HeadRoles` from `roles_reads`' answer."""
    grid = np.full((len(ROLES), model.num_layers, model.num_heads), np.nan, dtype=np.float32)
    for index in pattern_layers(model):
        grid[:, index, :] = out[index]
    scores = {role: grid[i] for i, role in enumerate(ROLES)}
    for array in scores.values():
        array.setflags(write=False)
    return HeadRoles(prompt_key(prompt), tokens_of(model, out["input_ids"]), scores)


#: ``session.each(prompts)``'s question (`run_each`).
ROLES_QUESTION = Question("head_roles", roles_reads, roles_result)


def head_roles(model, prompt: str) -> HeadRoles:
    """One request: every served layer's pattern of ``prompt``, reduced to `HeadRoles`."""
    ids, reads, build = roles_plan(model, prompt)
    reader = model.reader()
    with model.trace(ids, temperature=0.0, max_tokens=1):
        out = roles_reads(reader, *reads).save()
    return roles_result(model, ids, out, *build)
