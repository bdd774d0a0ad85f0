"""Activation patching and a pair's logit lens: `PatchResult`, `PairLens`, and their requests.

Everything here takes a `StandardizedVLLM` and runs on the session's worker. Inputs are
checked before any request, with the messages below.

On this engine each invoke of a trace is its own vLLM request: a value read in one
invoke cannot be used in another (nnsight refuses ``tracer.barrier`` here). So a
patching sweep is one request whose clean invoke reads the values to patch (and whose
clean and corrupted invokes give the end points), then the cells, at most
:data:`PATCH_CELLS` an engine call: one registered block (`StandardizedVLLM.registered`,
shipped once a sweep) and a plain vLLM request of the corrupted prompt a cell. The
chunk's cells are loaded into the engine's workers first (`_load_cells`), and each
request's copy of the block takes one as it starts, writes its clean slice and reads
the metric, saving which cell it took.

Head ablation inside another request (the prompt request)::

    heads = check_heads(model, ablate)                  # before the trace: clear errors
    with model.trace(temperature=0.0, max_tokens=1) as tracer:
        out = dict().save()
        with tracer.invoke(text):                       # the ablated run
            ... reads of layer i up to its attention probabilities ...
            ablate_heads(model, heads, layer=i)         # before layer i's head outputs
            ... the rest of layer i, the next layers, the logits ...
            out["ablated"] = model.next_token_probs[0]
        with tracer.invoke(text):                       # the one extra invoke: clean
            out["clean"] = model.next_token_probs[0]
    delta = ablation_delta(out["clean"], out["ablated"], heads)

Within an invoke values must be touched in execution order, so `ablate_heads` without
``layer`` (every listed layer at once) fits a trace that reads nothing before those
layers' head outputs; a trace that reads each layer calls it per layer, as above.
"""

from __future__ import annotations

import math
import pickle
from collections import deque
from typing import Callable
from dataclasses import dataclass

import numpy as np
import torch

from ..engine import edit_in_place, module_of
from ..requests.common import (
    LENS_K,
    ONE_GREEDY_STEP,
    Tokens,
    check_prompt,
    crossing,
    one_token,
    texts_of,
    tokens_of,
)
from ..requests.tables import table
from ..requests.lens import LensGrid
from ..requests.progress import NO_PROGRESS, Every, Progress
from ..requests.sites import (
    HEAD_SITES,
    POSITION_SITES,
    SITE_HOST,
    SITES,
    UNKNOWN_SITE,
    InterventionError,
    check_positions,
    check_site,
)
from ..requests.tables import cells


def normalized_effect(patched: np.ndarray, clean: float, corrupted: float) -> np.ndarray:
    """``(patched - corrupted) / (clean - corrupted)``: 1 where a patch restores the clean
    metric, 0 where it changes nothing. float64, so a float32 metric loses nothing."""
    patched = np.asarray(patched, dtype=np.float64)
    return (patched - np.float64(corrupted)) / (np.float64(clean) - np.float64(corrupted))


@dataclass(frozen=True)
class PatchResult:
    """One sweep: the clean run's value at ``site`` patched into the corrupted run, one
    cell at a time.

    ``patched[layer, column]`` (float32, ``[layers, columns]``) is the metric at the last
    position of the corrupted run with that cell patched: a column is one of
    ``positions``, or a head for ``attention_head_outputs`` (that head at every one of
    ``positions``). ``metric`` (`METRICS`): ``"logit_diff"`` logit(answer) - logit(foil),
    in logits; ``"logprob"`` log p(answer), in nats; ``"prob"`` p(answer). ``clean_metric``
    and ``corrupted_metric`` come from the request that read the clean values, so
    `effect` is exactly 1 and 0 at them. ``noise`` / ``subject``: causal tracing, where
    the corrupted run is the clean prompt with Gaussian noise of ``noise`` times the
    embedding table's standard deviation added to the token embeddings of positions
    ``subject[0]:subject[1]`` (drawn with ``seed``); ``None`` for a corrupted prompt.
    ``requests``: engine calls the sweep took (the clean read's trace, then one a chunk
    of cells).
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
    positions: tuple[int, ...] | None = None
    metric: str = "logit_diff"
    noise: float | None = None
    subject: tuple[int, int] | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.positions is None:
            object.__setattr__(self, "positions", tuple(range(len(self.clean))))
        object.__setattr__(self, "positions", tuple(int(p) for p in self.positions))
        if self.metric not in METRICS:
            raise ValueError(UNKNOWN_METRIC.format(metric=self.metric, metrics=", ".join(METRICS)))
        if self.site not in SITES:
            raise ValueError(f"unknown site {self.site!r}; the sites are {', '.join(SITES)}")
        if len(self.clean) != len(self.corrupted):
            raise ValueError(
                f"the clean prompt has {len(self.clean)} tokens and the corrupted one {len(self.corrupted)}"
            )
        patched = np.asarray(self.patched)
        if patched.ndim != 2 or patched.shape[0] < 1:
            raise ValueError(f"patched must be [layers, columns], got shape {patched.shape}")
        if self.site in POSITION_SITES and patched.shape[1] != len(self.positions):
            raise ValueError(f"patched has {patched.shape[1]} columns for {len(self.positions)} positions")
        if np.isinf(patched).any():
            raise ValueError("patched holds a value that is not finite (NaN marks a cell not patched yet)")
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
        """Raw text per column: the clean prompt's tokens at `positions` (a figure escapes
        them), or heads."""
        if self.per_head:
            return [f"head {h}" for h in range(self.patched.shape[1])]
        return [self.clean.texts[p] for p in self.positions]

    def metric_label(self, show=repr) -> str:
        """The metric in words, each token's text through ``show`` (a figure's escape)."""
        answer = show(self.answer_text)
        if self.metric == "logit_diff":
            return f"logit({answer}) − logit({show(self.foil_text)})"
        return f"log p({answer})" if self.metric == "logprob" else f"p({answer})"

    @property
    def corruption(self) -> str:
        """How the corrupted run was made, in words."""
        if self.subject is None:
            return "the corrupted prompt"
        start, stop = self.subject
        return f"noise x{self.noise:g} on positions {start}..{stop - 1} (seed {self.seed})"

    def to_pandas(self):
        """One row per cell: ``layer``, ``position`` or ``head``, ``token`` (a position's
        text), ``patched`` (the metric) and ``effect``."""
        layers, columns = self.patched.shape
        layer = np.repeat(np.arange(layers), columns)
        column = np.tile(np.arange(columns), layers)
        frame = {"layer": layer}
        if self.per_head:
            frame["head"] = column
        else:
            frame["position"] = np.array(self.positions)[column]
            frame["token"] = np.array(self.column_labels(), dtype=object)[column]
        frame["patched"] = self.patched.reshape(-1)
        frame["effect"] = self.effect.reshape(-1)
        return table(frame)


@dataclass(frozen=True)
class PairLens:
    """Two prompts of one token count, the lens of each and their difference.

    ``first_diff`` / ``second_diff`` are ``[layers, positions]``: the lens's
    logit(answer) - logit(foil) (``project_on_vocab`` of each layer's output);
    `difference` is first - second.
    """

    first: LensGrid
    second: LensGrid
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

    def to_pandas(self):
        """One row per (layer, position): ``first_token`` / ``second_token`` and the lens's
        logit(answer) - logit(foil) in each (``first_diff``, ``second_diff``) and their ``difference``."""
        layers, count = self.first_diff.shape
        return cells(
            {"layer": range(layers), "position": range(count)},
            {"first_diff": self.first_diff, "second_diff": self.second_diff, "difference": self.difference},
            {
                "first_token": ("position", self.first.tokens.texts),
                "second_token": ("position", self.second.tokens.texts),
            },
        )


#: Most cells an engine call of a sweep holds (a vLLM request each, streamed through the
#: engine: progress and a stop come between its steps). A cell's request ships nothing
#: (the block is registered once), so the bound is the memory of the loaded slices.
PATCH_CELLS = 1024


#: What a sweep measures at the last position: logit(answer) - logit(foil), or the
#: answer's log-probability or probability.
METRICS = ("logit_diff", "logprob", "prob")


UNKNOWN_METRIC = "unknown metric {metric!r}; the metrics are {metrics}"


NEEDS_FOIL = "the metric logit_diff needs a foil (or metric='prob' or 'logprob', which read the answer alone)"


TOKEN_COUNTS = (
    "the clean prompt is {clean} tokens and the corrupted prompt {corrupted} tokens; "
    "patching needs the same number of tokens in both"
)


SAME_TOKEN = "the answer and the foil are the same token ({text!r}); their logit difference is always 0"


NO_DIFFERENCE = (
    "the clean and corrupted runs give the same {metric} ({value:.6g}): there is nothing for a patch to restore"
)


#: Causal tracing (Meng et al., 2022): the subject's embeddings get Gaussian noise of
#: `NOISE` times the embedding table's standard deviation.
NOISE = 3.0


SUBJECT = (
    "subject is the span of the prompt whose embeddings get the noise, (start, stop) with "
    "0 <= start < stop <= {count}; got {got!r}"
)


NEEDS_SUBJECT = "without a corrupted prompt, patching is causal tracing: give subject=(start, stop), the noised span"


SUBJECT_WITH_PROMPT = "subject= is for causal tracing (corrupted=None); with a corrupted prompt there is no noise"


NOISE_SCALE = (
    "noise is how many of the embedding table's standard deviations the noise has, a positive number; got {got!r}"
)


#: A site's other name: ``"heads"`` is each head's output, one cell a (layer, head).
SITE_NAMES = {"heads": "attention_head_outputs"}


def check_metric(metric: str, foil) -> str:
    if metric not in METRICS:
        raise InterventionError(UNKNOWN_METRIC.format(metric=metric, metrics=", ".join(METRICS)))
    if metric == "logit_diff" and foil is None:
        raise InterventionError(NEEDS_FOIL)
    return metric


def check_subject(subject, count: int) -> tuple[int, int]:
    if subject is None:
        raise InterventionError(NEEDS_SUBJECT)
    if (
        not isinstance(subject, (tuple, list))
        or len(subject) != 2
        or not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in subject)
        or not 0 <= int(subject[0]) < int(subject[1]) <= count
    ):
        raise InterventionError(SUBJECT.format(count=count, got=subject))
    return int(subject[0]), int(subject[1])


def check_noise(noise) -> float:
    if isinstance(noise, bool) or not isinstance(noise, (int, float, np.floating)) or not 0 < float(noise) < math.inf:
        raise InterventionError(NOISE_SCALE.format(got=noise))
    return float(noise)


def check_pair(model, first, second, answer, foil):
    """Both prompts' token ids (the same count) and the answer's and foil's ``(id, text)``
    (the foil's ``(None, None)`` where there is none)."""
    first_ids = check_prompt(model, first)
    second_ids = check_prompt(model, second)
    if len(first_ids) != len(second_ids):
        raise InterventionError(TOKEN_COUNTS.format(clean=len(first_ids), corrupted=len(second_ids)))
    answer_token = one_token(model, answer, "answer", InterventionError)
    if foil is None:
        return first_ids, second_ids, answer_token, (None, None)
    foil_token = one_token(model, foil, "foil", InterventionError)
    if answer_token[0] == foil_token[0]:
        raise InterventionError(SAME_TOKEN.format(text=answer_token[1]))
    return first_ids, second_ids, answer_token, foil_token


def _site_host(model, site: str, layer: int):
    """The envoy that serves ``site`` in block ``layer`` (the block, or its attention)."""
    block = model.layers[layer]
    return getattr(block, SITE_HOST[site]) if SITE_HOST[site] else block


def _site_value(model, site: str, layer: int):
    return getattr(_site_host(model, site, layer), site)


def _cell_slice(site: str, value, column: int, positions: list[int]):
    """One cell's part of a site's value: a position's row, or a head at ``positions``."""
    if site in HEAD_SITES:
        return value[:, positions, column]
    return value[:, column]


def _patch_cell(host, site: str, column: int, positions: list[int], value) -> None:
    """Write one cell's clean slice into the running (corrupted) request, at ``site`` of
    ``host`` (`_site_host`), in place in the step's tensors (`edit_in_place`: a step of
    many cells' requests would otherwise copy its whole slab once a cell)."""

    def write(target):
        if site in HEAD_SITES:
            target[:, positions, column] = value
        else:
            target[:, column] = value

    edit_in_place(host, site, write)


def _noise_embeddings(embed, subject: tuple[int, int], noise) -> None:
    """Inside an invoke: add ``noise`` (``[subject length, hidden]``) to the subject's
    token embeddings, the output of ``embed`` (the ``embed_tokens`` envoy), in place."""
    embeddings = embed.output
    rows = embeddings[0] if embeddings.dim() == 3 else embeddings  # vLLM's are [tokens, hidden]
    rows[subject[0] : subject[1]] += noise.to(device=rows.device, dtype=rows.dtype)


def _first_noise(model, subject: tuple[int, int], unit, scale: float):
    """Inside the first request's corrupted invoke: the noise, ``unit`` times ``scale``
    embedding-table standard deviations, added and returned (the later requests add this
    very tensor)."""
    table_ = module_of(model.embed_tokens).weight[: model.vocab_size]
    deviation = table_.float().std()
    noise = (unit.to(deviation.device) * (scale * deviation)).to(table_.dtype)
    _noise_embeddings(model.embed_tokens, subject, noise)
    return noise.cpu(), deviation.cpu()


def _metric_reads(root, pair: list[int]):
    """Inside an invoke: the last position's logits of answer and foil, and their
    log-sum-exp (every metric comes from these three)."""
    logits = root.logits[0, -1].float()
    return crossing(torch.cat([logits[pair], logits.logsumexp(-1, keepdim=True)]))


def _read_clean(model, clean: list[int], corrupted: list[int], site: str, pair: list[int], noised):
    """Request 1: the clean run's value at ``site`` in every layer; both end points.
    ``noised = (subject, unit noise, scale)`` for causal tracing, else None."""
    layers = model.num_layers
    reader = model.reader()  # reads only, and the noise is added in place
    with model.trace(**ONE_GREEDY_STEP) as tracer:
        first = dict().save()
        with tracer.invoke(clean):
            values = []
            for layer in range(layers):
                values.append(_site_value(reader, site, layer))
            first["values"] = values
            first["clean"] = _metric_reads(reader, pair)
        with tracer.invoke(corrupted):
            if noised is not None:
                first["noise"] = _first_noise(reader, *noised)
            first["corrupted"] = _metric_reads(reader, pair)
    return first


#: The cells waiting in this process (an engine's worker) for a sweep's requests: one
#: request's registered copy takes one as it starts (`_take_cell`). A sweep loads each
#: engine call's cells before its requests run (`_load_cells`, in every worker).
_CELLS: deque = deque()


CELLS_LOST = (
    "a sweep's engine call from layer {layer}, column {column} on came back with a cell taken twice or not at all"
)


def _load_cells(worker, payload: bytes) -> int:
    """In each of the engine's workers (vLLM's ``collective_rpc``): the next chunk's cells,
    ``(layer, column)`` each and their clean slices stacked in one tensor, pickled (vLLM's
    own encoding of the call's arguments would turn the tensors into lists); the slices
    cross to the worker's device in one copy, and each cell takes its row of it."""
    places, stacked = pickle.loads(payload)  # noqa: S301 - the kernel's own bytes, this session's
    device = getattr(worker, "device", None)
    if device is not None:
        stacked = stacked.to(device)
    _CELLS.clear()
    _CELLS.extend((index, layer, column, stacked[index]) for index, (layer, column) in enumerate(places))
    return len(_CELLS)


def _take_cell() -> tuple:
    return _CELLS.popleft()


def _cell_reads(model, site: str, pair: list[int], positions: list[int], subject, noise) -> dict:
    """A registered copy, one a request: take a cell, write its clean slice into the
    running (corrupted) request, read the metric. ``subject``/``noise``: causal tracing's
    noise, added first (``subject`` None: none)."""
    index, layer, column, value = _take_cell()
    if subject is not None:
        _noise_embeddings(model.embed_tokens, subject, noise)
    _patch_cell(_site_host(model, site, layer), site, column, positions, value)
    return {"cell": index, "metric": _metric_reads(model, pair)}


def _sweep(model, run, corrupted: list[int], part: list, slices: torch.Tensor, heard: Callable) -> None:
    """One engine call: ``part``'s cells loaded in the workers, then one request a cell,
    each taking its own (in whatever order the engine starts them). ``heard(cell, reads)``
    hears each cell's metric reads (``cell`` indexes ``part``) as steps finish them.
    ``slices``: the cells' clean slices, stacked in ``part``'s order."""
    model.vllm_entrypoint.collective_rpc(_load_cells, args=(pickle.dumps((part, slices)),))
    taken = set()

    def finished(indices: list[int], found: list) -> None:
        for at in indices:
            cell = int(found[at]["cell"])
            if cell in taken:
                raise RuntimeError(CELLS_LOST.format(layer=part[0][0], column=part[0][1]))
            taken.add(cell)
            heard(cell, found[at]["metric"])

    run([corrupted] * len(part), finished)
    if len(taken) != len(part):
        raise RuntimeError(CELLS_LOST.format(layer=part[0][0], column=part[0][1]))


def _metric(reads, metric: str) -> float:
    """The metric from `_metric_reads`'s three numbers, in float64."""
    answer, foil, total = (float(x) for x in np.asarray(reads, dtype=np.float64).reshape(-1))
    if metric == "logit_diff":
        return answer - foil
    if metric == "logprob":
        return answer - total
    return math.exp(answer - total)


def patch(
    model,
    clean,
    corrupted,
    answer,
    foil=None,
    site: str = "layer_output",
    chunk: int = PATCH_CELLS,
    progress: Progress = NO_PROGRESS,
    *,
    positions=None,
    metric: str = "logit_diff",
    noise: float = NOISE,
    subject=None,
    seed: int = 0,
) -> PatchResult:
    """Patch the clean run's ``site`` into the corrupted run, cell by cell: a `PatchResult`.

    A cell is (layer, position), or (layer, head) for ``attention_head_outputs`` (also
    called ``"heads"``: that head at every one of ``positions``). An engine call holds at
    most ``chunk`` cells, a request each, streamed through the engine; ``progress`` is
    told of the cells done every few steps (`progress.Every`: a cancel is honoured
    there), and its partial answer has NaN at the cells not yet patched.

    Args:
        clean, corrupted: prompts of one token count; ``corrupted=None`` is causal tracing:
            the clean prompt with ``noise`` times the embedding table's standard deviation
            of Gaussian noise (``seed``) on the embeddings of ``subject=(start, stop)``.
        answer, foil: tokens; ``foil`` is needed by ``metric="logit_diff"`` only.
        positions: the positions patched (``None``: all); the columns of a position site.
        metric: one of `METRICS`.
    """
    site = SITE_NAMES.get(site, site)
    if site not in SITES:
        raise InterventionError(UNKNOWN_SITE.format(site=site, sites=", ".join(SITES + tuple(SITE_NAMES))))
    metric = check_metric(metric, foil)
    tracing = corrupted is None
    if not tracing and subject is not None:
        raise InterventionError(SUBJECT_WITH_PROMPT)
    clean_ids, corrupted_ids, (answer_id, answer_text), (foil_id, foil_text) = check_pair(
        model, clean, clean if tracing else corrupted, answer, foil
    )
    count = len(clean_ids)
    chosen = check_positions(positions, count)
    noised = None
    if tracing:
        span, scale = check_subject(subject, count), check_noise(noise)
        unit = torch.randn((span[1] - span[0], model.hidden_size), generator=torch.Generator().manual_seed(int(seed)))
        noised = (span, unit, scale)
    check_site(model, site)
    if chunk < 1:
        raise InterventionError(f"chunk must be at least 1, got {chunk}")
    pair = [answer_id, answer_id if foil_id is None else foil_id]
    first = _read_clean(model, clean_ids, corrupted_ids, site, pair, noised)
    clean_metric, corrupted_metric = _metric(first["clean"], metric), _metric(first["corrupted"], metric)
    if clean_metric == corrupted_metric:
        raise InterventionError(NO_DIFFERENCE.format(metric=metric, value=clean_metric))
    per_head = site in HEAD_SITES
    columns = list(range(model.num_heads)) if per_head else list(chosen)
    cells = [(layer, column) for layer in range(model.num_layers) for column in columns]
    values = first["values"]
    plan = (list(chosen), noised[0] if tracing else None, first["noise"][0] if tracing else None)
    patched = np.full(len(cells), np.nan, dtype=np.float32)
    requests = 1

    def result() -> PatchResult:
        return PatchResult(
            site=site,
            clean=tokens_of(model, clean_ids),
            corrupted=tokens_of(model, corrupted_ids),
            answer=answer_id,
            foil=foil_id,
            answer_text=answer_text,
            foil_text=foil_text,
            clean_metric=clean_metric,
            corrupted_metric=corrupted_metric,
            patched=patched.reshape(model.num_layers, len(columns)).copy(),
            requests=requests,
            positions=chosen,
            metric=metric,
            noise=noised[2] if tracing else None,
            subject=noised[0] if tracing else None,
            seed=int(seed) if tracing else None,
        )

    progress.start(len(cells))
    every = Every(progress)
    count = 0
    with model.registered(_cell_reads, (site, pair, *plan)) as run:
        for start in range(0, len(cells), chunk):
            part = cells[start : start + chunk]
            slices = torch.stack([_cell_slice(site, values[layer], column, plan[0]) for layer, column in part])

            def heard(cell: int, reads, start=start) -> None:
                nonlocal count
                patched[start + cell] = _metric(reads, metric)
                count += 1
                every.advance(count, result)

            requests += 1
            _sweep(model, run, corrupted_ids, part, slices, heard)
    progress.advance(count, result)
    return result()


def patch_requests(model, prompt_tokens: int, site: str = "layer_output", chunk: int = PATCH_CELLS) -> int:
    """The engine calls a sweep takes: 1 (the clean read) + ceil(cells / chunk).
    ``prompt_tokens``: the positions patched."""
    columns = model.num_heads if SITE_NAMES.get(site, site) in HEAD_SITES else prompt_tokens
    return 1 + math.ceil(model.num_layers * columns / chunk)


def _lens_reads(model, pair: list[int], k: int, out: dict) -> None:
    """Inside an invoke: each layer's lens top-k and logit(answer) - logit(foil)."""
    for layer in range(model.num_layers):
        logits = model.project_on_vocab(model.layers[layer].layer_output).float()[0]
        top = torch.softmax(logits, dim=-1).topk(k, dim=-1)
        out["probs"].append(top.values)
        out["ids"].append(top.indices)
        out["diff"].append(logits[:, pair[0]] - logits[:, pair[1]])
    final = torch.softmax(model.logits[0, -1].float(), dim=-1).topk(k)
    out["model"] = (final.values, final.indices)


def _lens_panel(model, ids, found: dict) -> LensGrid:
    top_ids = torch.stack(found["ids"]).cpu().numpy().astype(np.int64)
    texts = texts_of(model, top_ids)
    probs, model_ids = found["model"]
    return LensGrid(
        tokens_of(model, ids),
        top_ids,
        torch.stack(found["probs"]).cpu().numpy().astype(np.float32),
        texts,
        model_ids.cpu().numpy().astype(np.int64),
        probs.cpu().numpy().astype(np.float32),
    )


def compare(model, first: str, second: str, answer, foil, k: int = LENS_K) -> PairLens:
    """One request, two invokes: both prompts' lens and logit(answer) - logit(foil) per cell."""
    first_ids, second_ids, (answer_id, answer_text), (foil_id, foil_text) = check_pair(
        model, first, second, answer, foil
    )
    pair = [answer_id, foil_id]
    reader = model.reader()
    with model.trace(**ONE_GREEDY_STEP) as tracer:
        out = dict().save()
        with tracer.invoke(first_ids):
            mine = {"probs": [], "ids": [], "diff": []}
            _lens_reads(reader, pair, k, mine)
            out["first"] = mine
        with tracer.invoke(second_ids):
            theirs = {"probs": [], "ids": [], "diff": []}
            _lens_reads(reader, pair, k, theirs)
            out["second"] = theirs
    a, b = out["first"], out["second"]
    return PairLens(
        _lens_panel(model, first_ids, a),
        _lens_panel(model, second_ids, b),
        answer_id,
        foil_id,
        answer_text,
        foil_text,
        torch.stack(a["diff"]).cpu().numpy(),
        torch.stack(b["diff"]).cpu().numpy(),
    )
