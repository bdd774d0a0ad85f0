"""Occlusion: which input tokens the answer depends on.

    saliency = session.occlude("The Eiffel Tower is in the city of", " Paris").result()
    saliency.delta_logit       # [tokens]: the answer's logit with that token occluded, minus the clean one
    saliency.delta_prob        # the same for its probability
    saliency.exact             # [tokens]: True where the token was occluded alone

A position is occluded in its own invoke: its token replaced by a neutral one
(``mode="replace"``, the default: `NEUTRAL`, a single space, or the end-of-text token
where a space is not one token) or dropped (``mode="drop"``). The clean prompt is one more
invoke. Invokes go `OCCLUDE_INVOKES` to a request.

Past `COARSE_FROM` tokens (``resolution="auto"``) it answers early: it first occludes
`COARSE_BLOCKS` blocks of consecutive tokens (cut between words where the tokenizer marks
them), a full-width coarse row for the cost of about that many forwards, then occludes
the tokens of the strongest blocks one by one, about `REFINE_SHARE` of the prompt's
tokens; a token not refined shows its block's value (``exact`` False).
``resolution="token"`` occludes every token alone. A request holds as many invokes as
fit about a second (`progress.Pace`), so a cancel is honoured within about that.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..requests.common import Tokens, check_prompt, one_token, tokens_of
from ..requests.progress import NO_PROGRESS, Pace, Progress
from ..requests.sites import InterventionError
from ..requests.tables import table

#: The text whose token replaces an occluded one: a single space carries no content.
NEUTRAL = " "
MODES = ("replace", "drop")
#: Invokes per request at most (as a patching sweep's: each ships its own locals); a
#: request holds as many as fit about a second (`Pace`), the first `FIRST_INVOKES`.
OCCLUDE_INVOKES = 64
FIRST_INVOKES = 4
RESOLUTIONS = ("auto", "token")
#: From this many tokens, "auto" occludes blocks first (below it every token alone costs little).
COARSE_FROM = 64
#: Blocks in the coarse row: its cost is about that many forwards, whatever the length.
COARSE_BLOCKS = 8
#: Of the prompt's tokens, the share refined one by one: the strongest blocks' tokens.
REFINE_SHARE = 0.2
UNKNOWN_RESOLUTION = "unknown occlusion resolution {resolution!r}; the resolutions are {resolutions}"
UNKNOWN_MODE = "unknown occlusion mode {mode!r}; the modes are {modes}"
TOO_SHORT = "dropping a token needs a prompt of at least 2 tokens"


@dataclass(frozen=True)
class Occlusion:
    """The answer's logit and probability with each input token occluded.

    ``logits[i]`` / ``probs[i]``: with position ``i`` occluded (where ``exact[i]``), else
    with the block holding it occluded; NaN for a position not reached yet (a job's
    partial answer). ``blocks``: the coarse blocks ``(start, stop)`` occluded whole, with
    ``block_logits`` / ``block_probs`` (empty at full resolution). ``clean_logit`` /
    ``clean_prob``: the prompt as it is. ``neutral`` / ``neutral_text``: the replacing
    token (None when dropping). ``requests``: engine requests taken. Logits are the
    answer's raw logit; probabilities are in 0..1.
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
    exact: np.ndarray | None = None
    blocks: tuple = ()
    block_logits: np.ndarray | None = None
    block_probs: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.exact is None:
            object.__setattr__(self, "exact", np.ones(len(self.tokens), dtype=bool))

    @property
    def delta_logit(self) -> np.ndarray:
        """``[tokens]``: occluded minus clean logit (negative: the answer needed that token)."""
        return self.logits - self.clean_logit

    @property
    def delta_prob(self) -> np.ndarray:
        return self.probs - self.clean_prob

    def most_needed(self, k: int = 3) -> list[tuple[int, str, float]]:
        """The ``k`` positions whose occlusion lowers the answer's logit most: (position, text, Δlogit)."""
        delta = np.where(np.isnan(self.delta_logit), np.inf, self.delta_logit)
        order = [i for i in np.argsort(delta, kind="stable")[:k] if np.isfinite(delta[i])]
        return [(int(i), self.tokens.texts[i], float(self.delta_logit[i])) for i in order]

    def to_pandas(self):
        """One row per position: ``token``, the answer's ``logit`` and ``probability``
        with it occluded, their change from the clean run (``delta_logit``,
        ``delta_prob``) and ``exact`` (False: measured with its block occluded)."""
        return table(
            {
                "position": np.arange(len(self.tokens)),
                "token": np.array(self.tokens.texts, dtype=object),
                "logit": self.logits,
                "probability": self.probs,
                "delta_logit": self.delta_logit,
                "delta_prob": self.delta_prob,
                "exact": self.exact,
            }
        )


def neutral_token(model) -> tuple[int, str]:
    """The replacing token: `NEUTRAL` where it is one token, else the end-of-text token."""
    tokenizer = model.tokenizer
    ids = tokenizer(NEUTRAL, add_special_tokens=False)["input_ids"]
    if len(ids) == 1:
        return int(ids[0]), tokenizer.decode(ids)
    eos = tokenizer.eos_token_id
    return int(eos), tokenizer.decode([eos])


def occluded(ids: list[int], span: tuple[int, int], mode: str, neutral: int | None) -> list[int]:
    """The prompt with positions ``span`` (start, stop) occluded: replaced or dropped."""
    start, stop = span
    middle = [] if mode == "drop" else [neutral] * (stop - start)
    return ids[:start] + middle + ids[stop:]


def variants(ids: list[int], mode: str, neutral: int | None) -> list[list[int]]:
    """Each position's occluded prompt (token ids), at full resolution."""
    return [occluded(ids, (i, i + 1), mode, neutral) for i in range(len(ids))]


def word_blocks(texts: tuple[str, ...], size: int) -> list[tuple[int, int]]:
    """Consecutive positions in blocks of about ``size`` tokens, cut between words (a token
    whose text starts with a space or a newline starts a word) where one is near."""
    starts = [i for i, text in enumerate(texts) if i == 0 or text[:1].isspace()]
    blocks, start = [], 0
    while start < len(texts):
        stop = min(start + size, len(texts))
        cuts = [i for i in starts if start + size // 2 <= i <= stop]
        stop = cuts[-1] if cuts and stop < len(texts) else stop
        blocks.append((start, stop))
        start = stop
    return blocks


def occlude(
    model,
    prompt: str,
    answer: Any,
    mode: str = "replace",
    resolution: str = "auto",
    progress: Progress = NO_PROGRESS,
) -> Occlusion:
    """The prompt's positions occluded: the answer's logit and probability each time.

    Args:
        model: the `StandardizedVLLM`.
        prompt: the prompt; the answer is read at its last position.
        answer: a token's id or one token's text.
        mode: ``"replace"`` (by `neutral_token`) or ``"drop"``.
        resolution: ``"auto"`` (blocks first past `COARSE_FROM` tokens, then the strongest
            refined) or ``"token"`` (every token alone).
        progress: told of each chunk's invokes (`Progress`); its partial answer holds what
            is occluded so far, NaN elsewhere.

    Returns:
        An `Occlusion`.
    """
    if mode not in MODES:
        raise InterventionError(UNKNOWN_MODE.format(mode=mode, modes=", ".join(MODES)))
    if resolution not in RESOLUTIONS:
        raise InterventionError(UNKNOWN_RESOLUTION.format(resolution=resolution, resolutions=", ".join(RESOLUTIONS)))
    ids = check_prompt(model, prompt)
    if mode == "drop" and len(ids) < 2:
        raise InterventionError(TOO_SHORT)
    answer_id, answer_text = one_token(model, answer, "answer", InterventionError)
    neutral, neutral_text = neutral_token(model) if mode == "replace" else (None, None)
    tokens = tokens_of(model, ids)
    count = len(ids)
    coarse = resolution == "auto" and count > COARSE_FROM
    blocks = word_blocks(tokens.texts, math.ceil(count / COARSE_BLOCKS)) if coarse else []
    if mode == "drop":  # a block dropped whole must leave a prompt
        blocks = [span for span in blocks if span[1] - span[0] < count]
    state = {
        "values": np.full((count, 2), np.nan),
        "exact": np.zeros(count, dtype=bool),
        "blocks": np.full((len(blocks), 2), np.nan),
        "clean": (np.nan, np.nan),
        "requests": 0,
    }

    def result() -> Occlusion:
        values, block_values = state["values"].copy(), state["blocks"].copy()
        for array in (values, block_values):
            array.setflags(write=False)
        return Occlusion(
            prompt=prompt,
            tokens=tokens,
            answer=answer_id,
            answer_text=answer_text,
            mode=mode,
            neutral=neutral,
            neutral_text=neutral_text,
            clean_logit=float(state["clean"][0]),
            clean_prob=float(state["clean"][1]),
            logits=values[:, 0],
            probs=values[:, 1],
            requests=state["requests"],
            exact=state["exact"].copy(),
            blocks=tuple(blocks),
            block_logits=block_values[:, 0],
            block_probs=block_values[:, 1],
        )

    pace = Pace(first=FIRST_INVOKES, most=OCCLUDE_INVOKES)

    def run(spans: list, land, done_before: int) -> None:
        prompts = [occluded(ids, span, mode, neutral) for span in spans]
        start = 0
        while start < len(prompts):
            size = pace.next()
            began = time.perf_counter()
            rows = _run(model, prompts[start : start + size], answer_id)
            pace.took(len(rows), time.perf_counter() - began)
            state["requests"] += 1
            for offset, row in enumerate(rows):
                land(start + offset, row)
            start += len(rows)
            progress.advance(done_before + start, result)

    first = [(0, 0)] + (blocks if coarse else [(i, i + 1) for i in range(count)])
    refine_budget = int(REFINE_SHARE * count) if coarse else 0
    progress.start(len(first) - 1 + refine_budget)

    def land_first(index: int, row) -> None:
        if index == 0:
            state["clean"] = row
        elif coarse:
            start, stop = blocks[index - 1]
            state["blocks"][index - 1] = row
            state["values"][start:stop] = row
        else:
            state["values"][index - 1] = row
            state["exact"][index - 1] = True

    run(first, land_first, -1)
    if coarse:
        strength = np.abs(state["blocks"][:, 0] - state["clean"][0])
        refined: list[int] = []
        for block in np.argsort(-strength, kind="stable"):
            start, stop = blocks[block]
            if len(refined) + (stop - start) > max(refine_budget, stop - start) and refined:
                break
            refined.extend(range(start, stop))
        progress.start(len(first) - 1 + len(refined))

        def land_refined(index: int, row) -> None:
            state["values"][refined[index]] = row
            state["exact"][refined[index]] = True

        run([(i, i + 1) for i in refined], land_refined, len(first) - 1)
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
