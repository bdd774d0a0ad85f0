"""Occlusion: which input tokens the answer depends on, every position in one request.

    saliency = session.occlude("The Eiffel Tower is in the city of", " Paris").result()
    saliency.delta_logit       # [tokens]: the answer's logit with that token occluded, minus the clean one
    saliency.delta_prob        # the same for its probability

Each position is occluded in its own invoke: its token replaced by a neutral one
(``mode="replace"``, the default: `NEUTRAL`, a single space, or the end-of-text token
where a space is not one token) or dropped (``mode="drop"``: the prompt one token
shorter). The clean prompt is one more invoke. Invokes go `OCCLUDE_INVOKES` to a request,
so a prompt of N tokens takes ceil((N + 1) / OCCLUDE_INVOKES) requests; each invoke
returns two numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .common import Tokens, check_prompt, one_token, tokens_of
from .progress import NO_PROGRESS, Progress
from .sites import InterventionError

#: The text whose token replaces an occluded one: a single space carries no content.
NEUTRAL = " "
MODES = ("replace", "drop")
#: Invokes per request (as a patching sweep's: each ships its own locals).
OCCLUDE_INVOKES = 64
UNKNOWN_MODE = "unknown occlusion mode {mode!r}; the modes are {modes}"
TOO_SHORT = "dropping a token needs a prompt of at least 2 tokens"


@dataclass(frozen=True)
class Occlusion:
    """The answer's logit and probability with each input token occluded.

    ``logits[i]`` / ``probs[i]``: with position ``i`` occluded; ``clean_logit`` /
    ``clean_prob``: the prompt as it is. ``neutral`` / ``neutral_text``: the replacing
    token (None when dropping). ``requests``: engine requests taken.
    """

    prompt: str
    tokens: Tokens
    answer: int
    answer_text: str
    mode: str
    neutral: int | None
    neutral_text: str | None
    clean_logit: float
    clean_prob: float
    logits: np.ndarray
    probs: np.ndarray
    requests: int

    @property
    def delta_logit(self) -> np.ndarray:
        """``[tokens]``: occluded minus clean logit (negative: the answer needed that token)."""
        return self.logits - self.clean_logit

    @property
    def delta_prob(self) -> np.ndarray:
        return self.probs - self.clean_prob

    def most_needed(self, k: int = 3) -> list[tuple[int, str, float]]:
        """The ``k`` positions whose occlusion lowers the answer's logit most: (position, text, Δlogit)."""
        order = np.argsort(self.delta_logit, kind="stable")[:k]
        return [(int(i), self.tokens.texts[i], float(self.delta_logit[i])) for i in order]


def neutral_token(model) -> tuple[int, str]:
    """The replacing token: `NEUTRAL` where it is one token, else the end-of-text token."""
    tokenizer = model.tokenizer
    ids = tokenizer(NEUTRAL, add_special_tokens=False)["input_ids"]
    if len(ids) == 1:
        return int(ids[0]), tokenizer.decode(ids)
    eos = tokenizer.eos_token_id
    return int(eos), tokenizer.decode([eos])


def variants(ids: list[int], mode: str, neutral: int | None) -> list[list[int]]:
    """Each position's occluded prompt (token ids)."""
    if mode == "drop":
        return [ids[:i] + ids[i + 1 :] for i in range(len(ids))]
    return [ids[:i] + [neutral] + ids[i + 1 :] for i in range(len(ids))]


def occlude(model, prompt: str, answer: Any, mode: str = "replace", progress: Progress = NO_PROGRESS) -> Occlusion:
    """Every position of ``prompt`` occluded in turn: the answer's logit and probability.

    Args:
        model: the `StandardizedVLLM`.
        prompt: the prompt; the answer is read at its last position.
        answer: a token's id or one token's text.
        mode: ``"replace"`` (by `neutral_token`) or ``"drop"``.
        progress: told of each chunk's positions (`Progress`); its partial answer holds the
            positions occluded so far, NaN at the others.

    Returns:
        An `Occlusion`.
    """
    if mode not in MODES:
        raise InterventionError(UNKNOWN_MODE.format(mode=mode, modes=", ".join(MODES)))
    ids = check_prompt(model, prompt)
    if mode == "drop" and len(ids) < 2:
        raise InterventionError(TOO_SHORT)
    answer_id, answer_text = one_token(model, answer, "answer", InterventionError)
    neutral, neutral_text = neutral_token(model) if mode == "replace" else (None, None)
    prompts = [ids] + variants(ids, mode, neutral)
    tokens = tokens_of(model, ids)
    found: list = []
    requests = 0

    def result() -> Occlusion:
        values = np.full((len(prompts), 2), np.nan)
        values[: len(found)] = [[float(logit), float(prob)] for logit, prob in found]
        logits, probs = values[1:, 0].copy(), values[1:, 1].copy()
        for array in (logits, probs):
            array.setflags(write=False)
        return Occlusion(
            prompt=prompt,
            tokens=tokens,
            answer=answer_id,
            answer_text=answer_text,
            mode=mode,
            neutral=neutral,
            neutral_text=neutral_text,
            clean_logit=float(values[0, 0]),
            clean_prob=float(values[0, 1]),
            logits=logits,
            probs=probs,
            requests=requests,
        )

    progress.start(len(prompts) - 1)
    for start in range(0, len(prompts), OCCLUDE_INVOKES):
        found.extend(_run(model, prompts[start : start + OCCLUDE_INVOKES], answer_id))
        requests += 1
        progress.advance(len(found) - 1, result)
    return result()


def _run(model, prompts: list[list[int]], answer: int) -> list:
    root = model.root_only()  # what each invoke ships: the root's values, not the whole tree
    with model.trace(temperature=0.0, max_tokens=1) as tracer:
        rows = [None] * len(prompts)
        rows.save()
        for index in range(len(prompts)):
            ids = prompts[index]
            with tracer.invoke(ids):
                logits = root.logits[0, -1].float()
                rows[index] = (float(logits[answer]), float(logits.softmax(-1)[answer]))
    return rows


def occlusion_requests(tokens: int, chunk: int = OCCLUDE_INVOKES) -> int:
    """Engine requests an occlusion of a ``tokens``-token prompt takes."""
    return math.ceil((tokens + 1) / chunk)
