"""What each attention head does on a prompt, in one request: `HeadRoles`.

A trained model's heads have roles that show in their patterns: a previous-token head
puts its weight on the token just before the query, a sink head on the first token.
`head_roles` reads every layer's prefill pattern in one trace and reduces each head to
a few numbers in the worker (no pattern leaves it), so the tour and the head grid can
find such heads on any prompt instead of naming them by hand::

    roles = session.head_roles("The Eiffel Tower is in the city of Paris.").result()
    layer, head = roles.best("previous")     # the strongest previous-token head
    roles.scores["first"].mean()             # how much weight the first token takes
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .common import Tokens
from .common import RequestRefused, check_prompt, tokens_of
from .attention import pattern_layers

#: A head's roles, each the mean of one kind of weight over the prompt's queries.
#: ``previous``: on the token just before the query (queries from position 2, so that
#: the first token's own pull does not count as a previous-token head's);
#: ``first``: on the first token (queries from position 1); ``current``: on itself.
ROLES = ("previous", "first", "current")
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
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; the roles are {', '.join(ROLES)}")
        grid = np.nan_to_num(self.scores[role], nan=-1.0)
        layer, head = np.unravel_index(int(np.argmax(grid)), grid.shape)
        return int(layer), int(head)

    def score(self, role: str, layer: int, head: int) -> float:
        return float(self.scores[role][layer, head])


def role_scores(probabilities: torch.Tensor) -> torch.Tensor:
    """``[1, heads, q, k]`` probabilities -> ``[roles, heads]`` (the order of `ROLES`)."""
    pattern = probabilities[0].float()
    count = pattern.shape[-1]
    positions = torch.arange(count, device=pattern.device)
    previous = pattern[:, positions[2:], positions[2:] - 1].mean(-1)
    first = pattern[:, 1:, 0].mean(-1)
    current = pattern[:, positions[1:], positions[1:]].mean(-1)
    return torch.stack([previous, first, current]).cpu()


def head_roles(model, prompt: str) -> HeadRoles:
    """One request: every served layer's pattern of ``prompt``, reduced to `HeadRoles`."""
    ids = check_prompt(model, prompt)
    if len(ids) < 3:
        raise RequestRefused(TOO_SHORT.format(text=prompt, count=len(ids)))
    layers = pattern_layers(model)
    with model.trace(prompt, temperature=0.0, max_tokens=1):
        out = dict().save()
        out["input_ids"] = model.input_ids[0].cpu()
        for index in layers:
            out[index] = role_scores(model.layers[index].self_attn.attention_probabilities)
    grid = np.full((len(ROLES), model.num_layers, model.num_heads), np.nan, dtype=np.float32)
    for index in layers:
        grid[:, index, :] = out[index].numpy()
    scores = {role: grid[i] for i, role in enumerate(ROLES)}
    for array in scores.values():
        array.setflags(write=False)
    return HeadRoles(prompt, tokens_of(model, out["input_ids"]), scores)
