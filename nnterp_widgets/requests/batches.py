"""Questions over many prompts at once: `Results`, and the batched driver behind
``session.each(prompts)``.

A batched request is the single request's own reads run for each prompt of a chunk,
which the engine runs as one batch, and each prompt's result is built from its reads
exactly as the single call builds it. Prompts whose reads take the same arguments
(positions counted from the end) share one registration: the reads are installed on the
engine once and every prompt is a plain request (`StandardizedVLLM.registered`); the
rest are one invoke each, many invokes a trace::

    results = session.each(prompts).prompt(window=1).result()   # Results of PromptResult
    results[3]                     # what session.prompt(prompts[3], window=1) gives
    results.errors                 # {index: the error that prompt got}: the others ran
    results.to_pandas()            # every result's table, a ``prompt`` column first
    results.mean()                 # where a mean means something (see `Results.mean`)

A chunk holds as many prompts as fit about two seconds (`Pace`), at most `MOST_PROMPTS`
and at most what the memory guard lets one request return, so a cancel is honoured
within a chunk and the partial answer (prompts not reached yet are None) grows chunk by
chunk.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .attention import STATS_QUESTION, PatternStats
from .attribution import ATTRIBUTION_QUESTION
from .common import RequestRefused, Tokens, prompt_ids
from .heads import ROLES_QUESTION, HeadRoles
from .lens import LENS_QUESTION
from .prompt import PROMPT_QUESTION
from .question import Question
from .values import VECTOR_QUESTION
from .progress import NO_PROGRESS, Every, Pace, Progress
from .tables import stacked, table

#: Prompts in a batch's first request, and at most in any (vLLM schedules a request's
#: invokes together; 256 keep a chunk's reads well under the message limit).
FIRST_PROMPTS = 8
MOST_PROMPTS = 256
#: A batched chunk's target length: twice a single request's, since a batch is waited on
#: as a whole and a larger chunk amortises the request's own cost.
BATCH_CHUNK_S = 2.0


NO_PROMPTS = "the batch has no prompts: give a list of texts or of token id lists"


MIXED = "a batch's prompts are all texts or all token id lists; got both"


NOT_A_LIST = (
    "a batch is a list of prompts (texts or token id lists), a pandas column, or a text file's pathlib.Path; got {kind}"
)


#: Prompts whose reads take the same arguments (a `Question`'s ``shared``) that are asked
#: through one registration instead of an invoke each: a registration ships the reads
#: once, not once a prompt, but costs its install and clear (two engine calls, about
#: 0.5 ms on the CPU engine in the kernel's process; a few prompts' invokes are as cheap).
REGISTER_AT = 8


COUNTS = "{what} has {got} entries for {count} prompts: give one for each, or one for all"


def check_batch(prompts: Any) -> list:
    """``prompts`` as a list (a pandas Series' values, a tuple, a list, a text file's
    lines); refused when empty, not a list, or texts mixed with id lists."""
    if isinstance(prompts, os.PathLike):
        prompts = [line for line in Path(prompts).read_text().splitlines() if line.strip()]
    if isinstance(prompts, (str, bytes)) or prompt_ids_or_none(prompts):
        raise TypeError(NOT_A_LIST.format(kind="one prompt: wrap it in a list"))
    values = getattr(prompts, "tolist", None)
    items = list(values()) if callable(values) else list(prompts) if isinstance(prompts, Sequence) else None
    if items is None:
        raise TypeError(NOT_A_LIST.format(kind=type(prompts).__name__))
    if not items:
        raise RequestRefused(NO_PROMPTS)
    kinds = {isinstance(item, str) for item in items}
    if len(kinds) > 1:
        raise RequestRefused(MIXED)
    return items


def prompt_ids_or_none(value: Any):
    """The ids of ``value`` if it is one prompt given as ids, else None (never raises)."""
    try:
        return prompt_ids(value)
    except TypeError:
        return None


def per_prompt(values: Any, count: int, what: str) -> list:
    """One value for each of ``count`` prompts: a list of ``count``, or one for all."""
    if isinstance(values, (list, tuple)) and not isinstance(values, str):
        if len(values) != count:
            raise RequestRefused(COUNTS.format(what=what, got=len(values), count=count))
        return list(values)
    return [values] * count


@dataclass(frozen=True)
class Results(Sequence):
    """One result per prompt of a batch, in the prompts' order.

    ``items[i]`` is what the single request gives for ``prompts[i]``, the error that
    prompt got (an exception: the others ran), or None where a job's partial answer has
    not reached it yet. ``kind``: the question (``"prompt"``, ``"attribute"``, ...);
    ``requests``: the engine requests (traces) it took (a generation or steering batch
    does not count its own: 0).
    """

    kind: str
    prompts: tuple
    items: tuple
    #: Engine requests (traces) the batch took.
    requests: int = 0

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index):
        return self.items[index]

    @property
    def errors(self) -> dict[int, BaseException]:
        """``{index: error}`` of the prompts that failed."""
        return {i: item for i, item in enumerate(self.items) if isinstance(item, BaseException)}

    @property
    def answered(self) -> list[tuple[int, Any]]:
        """``[(index, result)]`` of the prompts answered."""
        return [
            (i, item) for i, item in enumerate(self.items) if item is not None and not isinstance(item, BaseException)
        ]

    @property
    def done(self) -> int:
        return sum(item is not None for item in self.items)

    def to_pandas(self):
        """Every answered result's table (its ``to_pandas()``, or one row of numbers), one
        under another, with a ``prompt`` column (the prompt's index) first."""
        frames = {i: _frame(item) for i, item in self.answered}
        if not frames:
            from .tables import table

            return table({"prompt": []})
        frame = stacked(frames, "prompt")
        return frame[["prompt", *[c for c in frame.columns if c != "prompt"]]]

    def mean(self):
        """The mean over the answered prompts, where one means something: the lens's
        per-layer top-1 probability and agreement with the model (prompt, lens), each part's
        effect (attribute), each head's role scores (head_roles, a `HeadRoles`), each head's
        pattern summary (patterns, a `PatternStats`), a value's vector (value)."""
        mean = MEANS.get(self.kind)
        if mean is None:
            raise TypeError(f"a mean of {self.kind} results means nothing here; use to_pandas()")
        answered = [item for _, item in self.answered]
        if not answered:
            raise ValueError("no prompt was answered: nothing to average")
        return mean(answered)


def _frame(item):
    if hasattr(item, "to_pandas"):
        return item.to_pandas()
    from .tables import cells

    vector = np.asarray(item).reshape(-1)
    return cells({"feature": range(vector.size)}, {"value": vector})


#: ``Question.kind -> mean of a batch's answers``, for `Results.mean`; each is registered where it is
#: defined (`averages`).
MEANS: dict[str, Callable[[list], Any]] = {}


def averages(*questions: Question) -> Callable:
    """Registers the decorated function as `Results.mean` for batches of ``questions``."""

    def register(mean: Callable[[list], Any]) -> Callable[[list], Any]:
        for question in questions:
            MEANS[question.kind] = mean
        return mean

    return register


def run_each(
    model,
    prompts: list,
    question: Question,
    prepare: Callable,
    progress: Progress = NO_PROGRESS,
    *,
    bytes_each: Callable[[Any, list[int]], int] | None = None,
    max_bytes: int | None = None,
    most: int = MOST_PROMPTS,
) -> Results:
    """Ask one question of every prompt, many prompts a request.

    Args:
        model: the `StandardizedVLLM`.
        prompts: the batch (`check_batch`).
        question: what is asked (`Question`: its reads, its result, who shares them).
        prepare: ``prepare(model, index, prompt) -> (ids, reads_args, build_args)``: the
            single call's checks; what it raises (a `ValueError` or `TypeError`) is that
            prompt's answer, and the others go on.
        progress: hears the prompts done: after each chunk of invokes, and every few
            engine steps of a registration's stream (`Every`); its partial answer is the
            `Results` so far.
        bytes_each: ``bytes_each(model, ids)``, what one prompt's reads return, to keep a
            chunk's answer under ``max_bytes``.

    Returns:
        `Results`, in the prompts' order.
    """
    kind, reads, build = question.kind, question.reads, question.build
    items: list = [None] * len(prompts)
    ready = []
    for index, prompt in enumerate(prompts):
        try:
            ids, reads_args, build_args = prepare(model, index, prompt)
        except (ValueError, TypeError) as error:
            items[index] = error
            continue
        ready.append((index, ids, reads_args, build_args))
    progress.start(len(prompts))
    done = len(prompts) - len(ready)
    requests = 0

    def partial() -> Results:
        return Results(kind, tuple(prompts), tuple(items), requests)

    if done:
        progress.advance(done, partial)

    def answer(part: list, ask: Callable[[list], list]) -> None:
        nonlocal done, requests
        pace = Pace(first=min(FIRST_PROMPTS, most), most=most, seconds=BATCH_CHUNK_S)
        start = 0
        while start < len(part):
            size = pace.next()
            if bytes_each is not None and max_bytes is not None:
                size = _fitting(model, part[start : start + size], bytes_each, max_bytes)
            chunk = part[start : start + size]
            began = time.perf_counter()
            found = ask(chunk)
            requests += 1
            pace.took(len(chunk), time.perf_counter() - began)
            for (index, ids, _, build_args), reads_found in zip(chunk, found, strict=True):
                try:
                    items[index] = build(model, ids, reads_found, *build_args)
                except (ValueError, TypeError) as error:
                    items[index] = error
            start += len(chunk)
            done += len(chunk)
            progress.advance(done, partial)

    def stream(part: list, run: Callable) -> None:
        """A group's prompts through one registration, answers built as steps finish them."""
        nonlocal done, requests
        every = Every(progress)

        def finished(indices: list[int], found: list) -> None:
            nonlocal done
            for at in indices:
                index, ids, _, build_args = part[at]
                try:
                    items[index] = build(model, ids, found[at], *build_args)
                except (ValueError, TypeError) as error:
                    items[index] = error
            done += len(indices)
            every.advance(done, partial)

        requests += 1
        run([ids for _, ids, _, _ in part], finished)

    groups, loose = _sharing(ready, question.shared)
    for args, part in groups.items():
        with model.registered(reads, args) as run:
            stream(part, run)
        progress.advance(done, partial)
    answer(loose, lambda chunk: _batch_trace(model, [(ids, args) for _, ids, args, _ in chunk], reads))
    return partial()


def _sharing(ready: list, shared: Callable | None) -> tuple[dict, list]:
    """``ready``'s prompts as ``({shared args: prompts}, the rest)``: a group holds
    `REGISTER_AT` or more prompts whose reads take the same arguments."""
    groups: dict = {}
    loose = []
    for item in ready:
        key = shared(item[1], item[2]) if shared is not None else None
        try:
            hash(key)
        except TypeError:
            key = None
        if key is None:
            loose.append(item)
        else:
            groups.setdefault(key, []).append(item)
    for key in [key for key, part in groups.items() if len(part) < REGISTER_AT]:
        loose.extend(groups.pop(key))
    loose.sort(key=lambda item: item[0])
    return groups, loose


def _fitting(model, part: list, bytes_each: Callable, max_bytes: int) -> int:
    """How many of ``part``'s prompts one request may return (at least one)."""
    total = 0
    for count, (_, ids, _, _) in enumerate(part):
        total += bytes_each(model, ids)
        if total > max_bytes:
            return max(1, count)
    return len(part)


def _batch_trace(model, plans: list, reads: Callable) -> list:
    """One request: an invoke per ``(ids, reads_args)`` of ``plans``, reading through the
    model's `reader` (what an invoke ships is the reader's small tree). Its own frame, and
    the plans popped one an invoke, so each invoke ships its own plan and nothing more."""
    reader = model.reader()
    count = len(plans)
    with model.trace(temperature=0.0, max_tokens=1) as tracer:
        found = [None] * count
        found.save()
        for index in range(count):
            ids, args = plans.pop(0)
            with tracer.invoke(ids):
                found[index] = reads(reader, *args)
    return found


@averages(PROMPT_QUESTION, LENS_QUESTION)
def _lens_mean(results: list):
    """Per layer, over the prompts, at each prompt's last lens position: the lens's
    top-1 probability and how often its top-1 is the model's own prediction."""
    grids = [getattr(result, "lens", result) for result in results]
    top = np.stack([grid.top_ids[:, -1, 0] for grid in grids])
    probability = np.stack([grid.top_probs[:, -1, 0] for grid in grids])
    said = np.array([grid.model_top_ids[0] for grid in grids])
    return table(
        {
            "layer": np.arange(top.shape[1]),
            "top1_probability": probability.mean(0),
            "agrees_with_model": (top == said[:, None]).mean(0),
        }
    )


@averages(ATTRIBUTION_QUESTION)
def _attribution_mean(results: list):
    """Each part's mean direct effect over the prompts (`Attribution.to_pandas`'s rows)."""
    frame = stacked({i: result.to_pandas() for i, result in enumerate(results)}, "prompt")
    return frame.groupby(["part", "layer", "head"], sort=False)["effect"].mean().reset_index()


@averages(ROLES_QUESTION)
def _roles_mean(results: list):
    """A `HeadRoles` of each role's mean score over the prompts (NaN-aware)."""
    import warnings

    scores = {}
    for role in results[0].scores:
        with warnings.catch_warnings():  # a role scored on no prompt stays NaN, quietly
            warnings.simplefilter("ignore", RuntimeWarning)
            scores[role] = np.nanmean(np.stack([result.scores[role] for result in results]), axis=0)
        scores[role].setflags(write=False)
    return HeadRoles(f"the mean of {len(results)} prompts", Tokens((), ()), scores)


@averages(STATS_QUESTION)
def _stats_mean(results: list):
    """A `PatternStats` of each head's mean entropy and distance over the prompts."""
    first = results[0]
    return PatternStats(
        f"the mean of {len(results)} prompts",
        Tokens((), ()),
        first.layer_ids,
        np.mean([r.entropy for r in results], axis=0),
        np.mean([r.distance for r in results], axis=0),
    )


@averages(VECTOR_QUESTION)
def _vector_mean(results: list) -> np.ndarray:
    return np.stack(results).mean(0)
