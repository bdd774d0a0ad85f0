"""Generation and the lens modes: plain immutable data, each from one engine request.

    result = session.generate("The Eiffel Tower is in", max_tokens=8).result()
    result.tokens                  # the prompt's tokens, then the generated ones
    result.steps[0].availability   # the prefill: the pattern is served
    result.steps[1].availability["self_attn.attention_probabilities"]  # the decode reason
    result.lens                    # a LensGrid: layers x steps, a step's column per token
    result.modes                   # LensModes of the same columns (entropy; a target's
                                   # probability and rank when ``target=`` was given)
    modes = session.follow("The Eiffel Tower is in", " Paris").result()  # the prompt's

A generation runs in chunks, each one trace over some steps (`engine.steps`, nnsight's ``tracer.iter``):
the first chunk's step 0 is the prefill, whose lens is read at the last prompt position;
each later step writes one token. A later chunk starts from the token ids written so far
(its first step re-reads the sequence, as a prefill), so a job reports its progress and
partial answer between chunks and a cancel stops there; chunks are sized to about
`progress.CHUNK_S` seconds from the pace of the ones before (`progress.Pace`, the re-read as
a chunk's fixed start: where it alone passes half of that, a chunk runs twice it); the
first is `FIRST_CHUNK` steps, so the first tokens show at once. Greedy generation is the same in chunks or in one trace;
a sampled one (``temperature > 0``) draws each chunk afresh. The lens of a step is one
matrix product: every layer's last stream, stacked, through the final norm and the
unembedding. Everything is reduced in the worker (top-k, entropy, a target's probability
and rank), so no vocabulary-sized array leaves it, and moved to the CPU before it is
saved (an engine on a GPU serves CUDA tensors).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping

import numpy as np
import torch

import time

from ..engine import edit_in_place, steps
from .common import LENS_K, RequestRefused, Tokens, check_prompt, one_token, texts_of, token_text, tokens_of
from .lens import LensGrid
from .progress import NO_PROGRESS, Pace, Progress, Within
from .tables import cells

#: Tokens a generation writes unless told otherwise.
GENERATE_TOKENS = 8
#: Steps in a generation's first chunk: its first tokens show at once.
FIRST_CHUNK = 2
#: Sampling unless told otherwise: greedy, so a generation is reproducible.
GREEDY = MappingProxyType({"temperature": 0.0})

#: The lens modes, and what each shows per layer and position.
MODES = MappingProxyType(
    {
        "top-1": "the lens's top-1 probability",
        "probability": "the target token's probability",
        "rank": "the target token's rank (1: the lens's top-1)",
        "entropy": "the lens distribution's entropy, in nats",
    }
)
#: The modes that need a target token.
TARGET_MODES = ("probability", "rank")

# What bad input says (before any engine request).
MAX_TOKENS_TYPE = "max_tokens is the number of tokens to generate, a whole number; got {value!r}"
MAX_TOKENS_LOW = "max_tokens must be at least 1 (the number of tokens to generate); got {value}"
PAST_MAX_MODEL_LEN = (
    "the prompt is {prompt} tokens and {max_tokens} more make {total}, past this engine's "
    "max_model_len={limit}: generate at most {room} tokens, or shorten the prompt"
)
ONE_SEQUENCE = "a generation follows one sequence: n={n} is not supported (leave n at 1)"
MAX_TOKENS_TWICE = "give the length as max_tokens only (not also as {name})"
NEEDS_TARGET = "the {mode!r} mode shows a target token's {mode}: follow a target first"
UNKNOWN_MODE = "unknown lens mode {mode!r}; the modes are {modes}"
STEP_RANGE = "step {step} is out of range: this generation has steps 0..{last}"


class GenerationError(RequestRefused):
    """A generation the engine cannot take (bad length, bad target): said before any request."""


# -- data ---------------------------------------------------------------------------


def _frozen(array: np.ndarray, dtype, shape: tuple, what: str) -> np.ndarray:
    array = np.array(array, dtype=dtype)  # a copy: the object owns its numbers
    if array.shape != shape:
        raise ValueError(f"{what} is {array.shape}, expected {shape}")
    array.flags.writeable = False
    return array


@dataclass(frozen=True)
class Target:
    """A followed token: its id and text."""

    id: int
    text: str

    def __post_init__(self) -> None:
        if isinstance(self.id, bool) or not isinstance(self.id, numbers.Integral) or self.id < 0:
            raise ValueError(f"a target id is a non-negative int, got {self.id!r}")
        object.__setattr__(self, "id", int(self.id))


@dataclass(frozen=True)
class LensModes:
    """The lens at ``layers x columns`` in every mode of `MODES`.

    ``columns`` labels the columns (a prompt's tokens for `follow`; for a generation
    the token each step wrote), ``positions`` the sequence position each column's
    stream was read at. ``top_ids`` / ``top_probs`` / ``top_texts`` are the top-1;
    ``entropy`` is in nats. ``probability`` / ``rank`` are the target's (rank 1 is the
    top-1), present when ``target`` is.
    """

    columns: Tokens
    positions: tuple[int, ...]
    top_ids: np.ndarray
    top_probs: np.ndarray
    top_texts: tuple[tuple[str, ...], ...]
    entropy: np.ndarray
    target: Target | None = None
    probability: np.ndarray | None = None
    rank: np.ndarray | None = None

    def __post_init__(self) -> None:
        count = len(self.columns)
        if len(self.positions) != count:
            raise ValueError(f"{len(self.positions)} positions for {count} columns")
        layers = int(np.shape(self.top_ids)[0]) if np.ndim(self.top_ids) == 2 else -1
        shape = (layers, count)
        set_ = object.__setattr__
        set_(self, "positions", tuple(int(p) for p in self.positions))
        set_(self, "top_ids", _frozen(self.top_ids, np.int64, shape, "top_ids"))
        set_(self, "top_probs", _frozen(self.top_probs, np.float32, shape, "top_probs"))
        set_(self, "entropy", _frozen(self.entropy, np.float32, shape, "entropy"))
        if len(self.top_texts) != layers or any(len(row) != count for row in self.top_texts):
            raise ValueError(f"top_texts must be {layers} rows of {count} texts")
        if (self.target is None) != (self.probability is None) or (self.target is None) != (self.rank is None):
            raise ValueError("probability and rank come with a target, and only with one")
        if self.target is not None:
            set_(self, "probability", _frozen(self.probability, np.float32, shape, "probability"))
            set_(self, "rank", _frozen(self.rank, np.int64, shape, "rank"))
            if self.rank.size and self.rank.min() < 1:
                raise ValueError("a rank starts at 1 (the top-1)")

    @property
    def num_layers(self) -> int:
        return int(self.top_ids.shape[0])

    @property
    def layer_labels(self) -> list[str]:
        return [f"layers[{i}]" for i in range(self.num_layers)]

    def values(self, mode: str) -> np.ndarray:
        """``[layers, columns]``: what the cells show in ``mode`` (one of `MODES`)."""
        if mode not in MODES:
            raise ValueError(UNKNOWN_MODE.format(mode=mode, modes=", ".join(MODES)))
        if mode in TARGET_MODES and self.target is None:
            raise ValueError(NEEDS_TARGET.format(mode=mode))
        return {"top-1": self.top_probs, "probability": self.probability, "rank": self.rank, "entropy": self.entropy}[
            mode
        ]

    def modes(self) -> tuple[str, ...]:
        """The modes this object can show (the target's only with a target)."""
        return tuple(m for m in MODES if self.target is not None or m not in TARGET_MODES)

    def to_pandas(self):
        """One row per (layer, column): ``position``, ``token`` (the column's text), the
        top-1 ``id`` / ``text`` / ``probability``, ``entropy`` (nats), and the target's
        ``target_probability`` / ``target_rank`` where there is a target."""
        layers, count = np.shape(self.top_ids)[:2]
        values = {
            "id": self.top_ids,
            "text": np.array(self.top_texts, dtype=object),
            "probability": self.top_probs,
            "entropy": self.entropy,
        }
        if self.target is not None:
            values.update(target_probability=self.probability, target_rank=self.rank)
        frame = cells(
            {"layer": range(layers), "column": range(count)}, values, {"token": ("column", self.columns.texts)}
        )
        frame.insert(2, "position", np.asarray(self.positions)[frame["column"].to_numpy()])
        return frame


@dataclass(frozen=True)
class GenerationStep:
    """One step of a generation: 0 is the prefill, each later one a decode step.

    ``position`` is where the step's stream was read (the last prompt position on the
    prefill), ``token`` / ``text`` what the step wrote. ``lens_ids`` / ``lens_probs``:
    ``[layers, k]`` top-k of ``project_on_vocab(layer_output)`` at ``position``;
    ``model_ids`` / ``model_probs`` / ``model_texts``: ``[k]``, the model's own (its
    logits, before sampling). ``availability``: every value name -> ``None`` or why this step cannot
    serve it (the engine's ``support(step)``).
    """

    index: int
    position: int
    token: int
    text: str
    lens_ids: np.ndarray
    lens_probs: np.ndarray
    lens_texts: tuple[tuple[str, ...], ...]
    model_ids: np.ndarray
    model_probs: np.ndarray
    model_texts: tuple[str, ...]
    availability: Mapping[str, str | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if np.ndim(self.lens_ids) != 2:
            raise ValueError(f"lens_ids is [layers, k], got shape {np.shape(self.lens_ids)}")
        layers, k = np.shape(self.lens_ids)
        set_(self, "lens_ids", _frozen(self.lens_ids, np.int64, (layers, k), "lens_ids"))
        set_(self, "lens_probs", _frozen(self.lens_probs, np.float32, (layers, k), "lens_probs"))
        set_(self, "model_ids", _frozen(self.model_ids, np.int64, (k,), "model_ids"))
        set_(self, "model_probs", _frozen(self.model_probs, np.float32, (k,), "model_probs"))
        if len(self.lens_texts) != layers or any(len(row) != k for row in self.lens_texts):
            raise ValueError(f"lens_texts must be {layers} rows of {k} texts")
        if len(self.model_texts) != k:
            raise ValueError(f"model_texts must be {k} texts")
        if self.index < 0 or self.position < 0:
            raise ValueError("a step's index and position are non-negative")
        set_(self, "availability", MappingProxyType(dict(self.availability)))

    @property
    def is_prefill(self) -> bool:
        return self.index == 0

    def unavailable(self) -> dict[str, str]:
        """The values this step cannot serve, with their reasons."""
        return {name: reason for name, reason in self.availability.items() if reason is not None}


@dataclass(frozen=True)
class GenerationResult:
    """One generation: the prompt, what each step wrote and what the lens saw.

    ``tokens`` is the prompt's tokens then the generated ones (``prompt_length`` of the
    first). ``lens`` is a `LensGrid` whose columns are the steps (labelled with the
    token each wrote); ``modes`` the same columns' `LensModes`.
    """

    prompt: str
    tokens: Tokens
    prompt_length: int
    steps: tuple[GenerationStep, ...]
    modes: LensModes
    sampling: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "steps", tuple(self.steps))
        set_(self, "sampling", MappingProxyType(dict(self.sampling)))
        count = len(self.steps)
        if not count:
            raise ValueError("a generation has at least one step")
        if len(self.tokens) != self.prompt_length + count:
            raise ValueError(f"{len(self.tokens)} tokens for a {self.prompt_length}-token prompt and {count} steps")
        for i, step in enumerate(self.steps):
            if step.index != i or step.position != self.prompt_length - 1 + i:
                raise ValueError(f"step {i} is out of order (index {step.index}, position {step.position})")
            if self.tokens.ids[self.prompt_length + i] != step.token:
                raise ValueError(
                    f"step {i} wrote {step.token}, the tokens say {self.tokens.ids[self.prompt_length + i]}"
                )
        if self.modes.positions != tuple(step.position for step in self.steps):
            raise ValueError("the lens modes' columns are not this generation's steps")

    @property
    def generated(self) -> Tokens:
        """The generated tokens only."""
        start = self.prompt_length
        return Tokens(self.tokens.ids[start:], self.tokens.texts[start:])

    @property
    def prompt_tokens(self) -> Tokens:
        return Tokens(self.tokens.ids[: self.prompt_length], self.tokens.texts[: self.prompt_length])

    @property
    def text(self) -> str:
        """The generated text, token by token as the tokens show it."""
        return "".join(self.generated.texts)

    def step(self, index: int) -> GenerationStep:
        if not -len(self.steps) <= index < len(self.steps):
            raise IndexError(STEP_RANGE.format(step=index, last=len(self.steps) - 1))
        return self.steps[index]

    @property
    def lens(self) -> LensGrid:
        """The lens with one column per step (``[layers, steps, k]``), each column
        labelled with the token its step wrote; the model's top-k is the last step's."""
        last = self.steps[-1]
        return LensGrid(
            tokens=self.generated,
            top_ids=np.stack([s.lens_ids for s in self.steps], axis=1),
            top_probs=np.stack([s.lens_probs for s in self.steps], axis=1),
            top_texts=tuple(tuple(s.lens_texts[layer] for s in self.steps) for layer in range(last.lens_ids.shape[0])),
            model_top_ids=last.model_ids,
            model_top_probs=last.model_probs,
        )

    def to_pandas(self):
        """The lens at every step (`LensGrid.to_pandas` of `lens`): one row per (layer,
        step, rank), ``token`` the text the step wrote."""
        return self.lens.to_pandas().rename(columns={"position": "step"})


# -- checks (client side, before any request) ------------------------------------------


def check_max_tokens(model, prompt_ids: list[int], max_tokens: Any) -> int:
    """``max_tokens`` as an int; a `GenerationError` for one the engine cannot take."""
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, numbers.Integral):
        raise GenerationError(MAX_TOKENS_TYPE.format(value=max_tokens))
    max_tokens = int(max_tokens)
    if max_tokens < 1:
        raise GenerationError(MAX_TOKENS_LOW.format(value=max_tokens))
    limit = model.max_model_len
    total = len(prompt_ids) + max_tokens
    if limit is not None and total > limit:
        raise GenerationError(
            PAST_MAX_MODEL_LEN.format(
                prompt=len(prompt_ids), max_tokens=max_tokens, total=total, limit=limit, room=limit - len(prompt_ids)
            )
        )
    return max_tokens


def resolve_target(model, target: Any) -> Target | None:
    """``target`` (a token id, or text that is exactly one token) as a `Target`."""
    if target is None:
        return None
    return Target(*one_token(model, target, "target", GenerationError))


def sampling_settings(sampling: dict) -> dict:
    """vLLM's sampling settings over `GREEDY`; the length is ``max_tokens``'s alone."""
    if "max_new_tokens" in sampling:  # nnsight's spelling of max_tokens
        raise GenerationError(MAX_TOKENS_TWICE.format(name="max_new_tokens"))
    n = sampling.get("n", 1)
    if n != 1:
        raise GenerationError(ONE_SEQUENCE.format(n=n))
    return {**GREEDY, **sampling}


# -- in the worker -----------------------------------------------------------------


def lens_stats(logits: torch.Tensor, k: int, target: int | None) -> dict:
    """From lens logits ``[..., vocab]``: top-k, entropy and a target's probability and
    rank, each ``[...]`` (``[..., k]``), on the CPU. Runs in the engine's worker."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    probs = logp.exp()
    top = probs.topk(k, dim=-1)
    # A probability that underflows to 0 adds nothing (0 * -inf would be NaN).
    entropy = -torch.where(probs > 0, probs * logp, torch.zeros_like(probs)).sum(-1)
    found = {"top_ids": top.indices.cpu(), "top_probs": top.values.cpu(), "entropy": entropy.cpu()}
    if target is not None:
        mine = logp[..., target]
        found["probability"] = mine.exp().cpu()
        found["rank"] = ((logp > mine.unsqueeze(-1)).sum(-1) + 1).cpu()
    return found


def add_to_stream(stream, added: tuple, fresh: bool) -> None:
    """Inside a step: add a steering vector to one layer's output ``stream`` in place.

    ``added = (layer, vector, positions, decode, prompt_count)``: ``positions`` the
    prompt positions steered (``None``: all), ``decode`` whether the written tokens are
    too. ``fresh``: the step runs the whole sequence (the prefill, or a chunk's first
    step re-reading the prompt and the tokens written so far), else one new token.
    """
    _, vector, positions, decode, prompt_count = added
    vector = vector.to(device=stream.device, dtype=stream.dtype)
    if positions is None and decode:
        stream[:] += vector
        return
    if not fresh:
        if decode:
            stream[:] += vector
        return
    rows = stream[0]
    if positions is None:
        rows[:prompt_count] += vector
    else:
        rows[positions] += vector
    if decode and rows.shape[0] > prompt_count:
        rows[prompt_count:] += vector


def step_reads(model, step: int, k: int, target_id: int | None, added: tuple | None = None, fresh: bool = True) -> dict:
    """Inside a trace, on one generation step: what a `GenerationStep` is built from.
    The lens is one matrix product: every layer's last stream, stacked, projected at once.
    ``added`` (`add_to_stream`): a vector added to one layer's output stream before the
    lens reads it (an invoke touches values in execution order, so the edit happens
    inside the walk over the layers), in place in the step's tensors (`edit_in_place`),
    so ``model`` may be the engine's `reader`; ``fresh``: the step runs the whole sequence."""
    found = {}
    if step == 0:
        found["input_ids"] = model.input_ids[0].cpu()
    streams = []
    for index, layer in enumerate(model.layers):
        if added is not None and index == added[0]:
            stream = edit_in_place(layer, "layer_output", lambda value: add_to_stream(value, added, fresh))
        else:
            stream = layer.layer_output
        streams.append(stream[0, -1:])
    found["lens"] = lens_stats(model.project_on_vocab(torch.cat(streams)), k, target_id)
    found["model"] = lens_stats(model.logits.reshape(-1), k, None)
    logits = model.logits
    # Broken logits: not finite (the CPU's final norm), or all equal: a stream too large to
    # square in float32 comes out of a GPU's fused norm as zeros, so every token ties.
    found["logits_usable"] = bool(torch.isfinite(logits).all() & (logits.amax() > logits.amin()))
    found["token"] = model.samples.reshape(-1).cpu()
    return found


def run_chunks(
    model,
    sequences: list[tuple[list[int], tuple | None]],
    max_tokens: int,
    settings: dict,
    k: int = LENS_K,
    target_id: int | None = None,
    progress: Progress = NO_PROGRESS,
    partial: Any = None,
) -> list[list[dict]]:
    """Generate up to ``max_tokens`` steps for each of ``sequences`` (``(ids, added)``, see
    `add_to_stream`: one
    invoke each, in one trace a chunk), chunk by chunk; each step is read by `step_reads`
    (a module function: nnsight ships the trace's code to the worker by reference). Between chunks ``progress`` hears the steps written (the first
    sequence's) and ``partial(found)`` builds the answer so far. A sequence ends at its end
    of text; the generation ends when every sequence has."""
    found: list[list[dict]] = [[] for _ in sequences]
    ids = [list(sequence) for sequence, _ in sequences]
    live = [True] * len(sequences)
    progress.start(max_tokens)
    pace, written = Pace(first=FIRST_CHUNK, most=max_tokens), 0
    reader = model.reader()
    least = int(settings.get("min_tokens", 0) or 0)
    while written < max_tokens and any(live):
        chunk = min(pace.next(), max_tokens - written)
        chunk_settings = {**settings, "max_tokens": chunk}
        if least:
            chunk_settings["min_tokens"] = min(chunk, max(0, least - written))
        plan = [(index, ids[index], sequences[index][1]) for index in range(len(sequences)) if live[index]]
        started = time.perf_counter()
        with model.trace(**chunk_settings) as tracer:
            out = dict().save()
            for index, sequence, added in plan:
                with tracer.invoke(sequence):
                    read = list()
                    for at in steps(chunk):
                        read.append(step_reads(reader, written + at, k, target_id, added, at == 0))
                    out[index] = read
        for index, _, _ in plan:
            got = out.get(index, [])
            tokens = [int(s["token"][0]) for s in got]
            found[index].extend(got)
            ids[index].extend(tokens)
            ended = not settings.get("ignore_eos") and model.tokenizer.eos_token_id in tokens
            if len(got) < chunk or ended:
                live[index] = False
        written = max(len(got) for got in found)  # the live sequences move together
        pace.took(chunk, time.perf_counter() - started)
        progress.advance(written, (lambda: partial(found)) if partial is not None and found[0] else None)
    return found


def generate(
    model,
    prompt: str | list[int],
    max_tokens: Any = GENERATE_TOKENS,
    *,
    target: Any = None,
    k: int = LENS_K,
    progress: Progress = NO_PROGRESS,
    **sampling: Any,
) -> GenerationResult:
    """Generate up to ``max_tokens`` tokens after ``prompt`` (text, or token ids), in chunks.

    Greedy unless ``sampling`` (vLLM's sampling settings) says otherwise. Checks the
    length and the target first: bad input raises `GenerationError` before any request.
    ``progress`` hears the tokens written after each chunk; its partial answer is the
    generation so far.
    """
    prompt_ids = check_prompt(model, prompt)
    max_tokens = check_max_tokens(model, prompt_ids, max_tokens)
    followed = resolve_target(model, target)
    settings = sampling_settings(sampling)
    target_id = None if followed is None else followed.id

    def result(found: list) -> GenerationResult:
        return generation_result(model, prompt, prompt_ids, found[0], followed, settings)

    found = run_chunks(model, [(prompt_ids, None)], max_tokens, settings, k, target_id, progress, result)
    return result(found)


#: Prompts a batch's generation decodes together (each one invoke of every chunk's trace).
GENERATE_GROUP = 32


def run_groups(
    model,
    prompts: list,
    kind: str,
    plan: Callable,
    sequences: Callable,
    build: Callable,
    max_tokens: Any,
    settings: dict,
    progress: Progress = NO_PROGRESS,
    *,
    k: int = LENS_K,
    target_id: int | None = None,
    group: int = GENERATE_GROUP,
):
    """Generation over many prompts, ``group`` prompts decoding together (their sequences
    the invokes of `run_chunks`): `Results` in the prompts' order.

    ``plan(ids) -> extra``: a prompt's own checks (what it raises is its slot's answer);
    ``sequences(ids, extra)``: its ``(ids, added)`` sequences; ``build(prompt, ids, extra,
    found)``: its result from those sequences' steps (a `ValueError` it raises is its
    slot's answer). ``progress`` counts prompts; a cancel is honoured between any two
    chunks of tokens."""
    from .batches import Results

    items: list = [None] * len(prompts)
    ready = []
    for index, prompt in enumerate(prompts):
        try:
            ids = check_prompt(model, prompt)
            check_max_tokens(model, ids, max_tokens)
            ready.append((index, prompt, ids, plan(ids)))
        except (ValueError, TypeError) as error:
            items[index] = error

    def partial():
        return Results(kind, tuple(prompts), tuple(items))

    progress.start(len(prompts))
    done = len(prompts) - len(ready)
    for start in range(0, len(ready), group):
        part = ready[start : start + group]
        spans, runs = [], []
        for _, _, ids, extra in part:
            own = sequences(ids, extra)
            spans.append((len(runs), len(runs) + len(own)))
            runs += own
        found = run_chunks(model, runs, int(max_tokens), settings, k, target_id, Within(progress, done, partial))
        for (index, prompt, ids, extra), (first, last) in zip(part, spans, strict=True):
            try:
                items[index] = build(prompt, ids, extra, found[first:last])
            except ValueError as error:
                items[index] = error
        done += len(part)
        progress.advance(done, partial)
    return partial()


def generate_each(
    model,
    prompts: list,
    max_tokens: Any = GENERATE_TOKENS,
    *,
    target: Any = None,
    k: int = LENS_K,
    progress: Progress = NO_PROGRESS,
    group: int = GENERATE_GROUP,
    **sampling: Any,
):
    """`generate` of every prompt, ``group`` prompts decoding together: `Results` of
    `GenerationResult`, in order (`run_groups`). A prompt the engine cannot take (too long
    for ``max_tokens`` more) gets its error in its slot."""
    followed = resolve_target(model, target)
    settings = sampling_settings(sampling)

    def build(prompt, ids, extra, found):
        return generation_result(model, prompt, ids, found[0], followed, settings)

    return run_groups(
        model,
        prompts,
        "generate",
        lambda ids: None,
        lambda ids, extra: [(ids, None)],
        build,
        max_tokens,
        settings,
        progress,
        k=k,
        target_id=None if followed is None else followed.id,
        group=group,
    )


def follow(model, prompt: str, target: Any, k: int = 1) -> LensModes:
    """The prompt's lens in every mode, following ``target``, at every position: one trace."""
    ids = check_prompt(model, prompt)
    followed = resolve_target(model, target)
    target_id = None if followed is None else followed.id
    with model.trace(ids, temperature=0.0, max_tokens=1):
        out = dict().save()
        out["input_ids"] = model.input_ids[0].cpu()
        out["lens"] = [
            lens_stats(model.project_on_vocab(layer.layer_output)[0], k, target_id) for layer in model.layers
        ]
    ids = [int(i) for i in out["input_ids"].tolist()]
    stats = {name: torch.stack([layer[name] for layer in out["lens"]]) for name in out["lens"][0]}
    return _modes(model, tokens_of(model, ids), tuple(range(len(ids))), stats, followed)


# -- building the data (client side) ----------------------------------------------------


def _modes(model, columns: Tokens, positions: tuple, stats: dict, followed: Target | None) -> LensModes:
    """`LensModes` from `lens_stats` whose leading axes are ``[layers, columns]``."""
    top_ids = stats["top_ids"][..., 0].numpy()
    return LensModes(
        columns=columns,
        positions=positions,
        top_ids=top_ids,
        top_probs=stats["top_probs"][..., 0].numpy(),
        top_texts=texts_of(model, top_ids),
        entropy=stats["entropy"].numpy(),
        target=followed,
        probability=None if followed is None else stats["probability"].numpy(),
        rank=None if followed is None else stats["rank"].numpy(),
    )


def generation_result(
    model, prompt: str | list[int], prompt_ids: list[int], found: list, followed: Target | None, settings: dict
) -> GenerationResult:
    """A `GenerationResult` from the steps' `step_reads` (client side)."""
    if not isinstance(prompt, str):
        prompt = model.tokenizer.decode(list(prompt))
    text = token_text(model.tokenizer)
    prompt_ids = [int(i) for i in prompt_ids]
    written = [int(step["token"][0]) for step in found]
    start = len(prompt_ids)
    steps = []
    for index, step in enumerate(found):
        lens_ids = step["lens"]["top_ids"].numpy()
        steps.append(
            GenerationStep(
                index=index,
                position=start - 1 + index,
                token=written[index],
                text=text(written[index]),
                lens_ids=lens_ids,
                lens_probs=step["lens"]["top_probs"].numpy(),
                lens_texts=texts_of(model, lens_ids),
                model_ids=step["model"]["top_ids"].numpy(),
                model_probs=step["model"]["top_probs"].numpy(),
                model_texts=texts_of(model, step["model"]["top_ids"]),
                availability=model.support(step=index),
            )
        )
    # The steps' stats side by side: ``[layers, steps, ...]``, the columns of the modes.
    stats = {name: torch.stack([step["lens"][name] for step in found], dim=1) for name in found[0]["lens"]}
    tokens = tokens_of(model, prompt_ids + written)
    modes = _modes(
        model, Tokens(tokens.ids[start:], tokens.texts[start:]), tuple(s.position for s in steps), stats, followed
    )
    return GenerationResult(prompt, tokens, start, tuple(steps), modes, settings)
