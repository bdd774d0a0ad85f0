"""Activation patching and a pair's logit lens: `PatchResult`, `PairLens`, and their requests.

Everything here takes a `StandardizedVLLM` and runs on the session's worker. Inputs are
checked before any request, with the messages below.

On this engine each invoke of a trace is its own vLLM request: a value read in one
invoke cannot be used in another (nnsight refuses ``tracer.barrier`` here). So a
patching sweep is one request whose clean invoke reads the values to patch (and whose
clean and corrupted invokes give the end points), then one request per
:data:`PATCH_INVOKES` cells, each cell an invoke of the corrupted prompt that writes
its cell's clean slice.

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
import time
from dataclasses import dataclass

import numpy as np
import torch

from ..requests.common import LENS_K, ONE_GREEDY_STEP, Tokens, check_prompt, one_token, texts_of, tokens_of
from ..requests.lens import LensGrid
from ..requests.progress import NO_PROGRESS, Pace, Progress
from ..requests.sites import HEAD_SITES, POSITION_SITES, SITE_HOST, SITES, UNKNOWN_SITE, InterventionError, check_site


def normalized_effect(patched: np.ndarray, clean: float, corrupted: float) -> np.ndarray:
    """``(patched - corrupted) / (clean - corrupted)``: 1 where a patch restores the clean
    metric, 0 where it changes nothing. float64, so a float32 metric loses nothing."""
    patched = np.asarray(patched, dtype=np.float64)
    return (patched - np.float64(corrupted)) / (np.float64(clean) - np.float64(corrupted))


@dataclass(frozen=True)
class PatchResult:
    """One sweep: the clean run's value at ``site`` patched into the corrupted run, one
    cell at a time.

    ``patched[layer, column]`` is the metric, logit(answer) - logit(foil) at the last
    position, of the corrupted run with that cell patched; a column is a position, or a
    head for ``attention_head_outputs`` (all positions of that head). ``clean_metric``
    and ``corrupted_metric`` come from the request that read the clean values, so
    `effect` is exactly 1 and 0 at them. ``requests``: engine requests (traces) the
    sweep took.
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

    def __post_init__(self) -> None:
        if self.site not in SITES:
            raise ValueError(f"unknown site {self.site!r}; the sites are {', '.join(SITES)}")
        if len(self.clean) != len(self.corrupted):
            raise ValueError(
                f"the clean prompt has {len(self.clean)} tokens and the corrupted one {len(self.corrupted)}"
            )
        patched = np.asarray(self.patched)
        if patched.ndim != 2 or patched.shape[0] < 1:
            raise ValueError(f"patched must be [layers, columns], got shape {patched.shape}")
        if self.site in POSITION_SITES and patched.shape[1] != len(self.clean):
            raise ValueError(f"patched has {patched.shape[1]} columns for {len(self.clean)} positions")
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
        """Raw text per column: the clean prompt's tokens (a figure escapes them), or heads."""
        if self.per_head:
            return [f"head {h}" for h in range(self.patched.shape[1])]
        return list(self.clean.texts)


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


#: Cells per patching request. Measured on the tiny checkpoint (CPU, 2 cores): an invoke
#: costs about 26 ms alone, 7 ms each at 16 per trace, 6 ms at 64, 7 ms at 256; and
#: each invoke ships its own copy of its locals, so chunks stay modest.
PATCH_INVOKES = 64
#: Cells in a sweep's first request; later ones hold as many as the pace fits (`Pace`).
FIRST_CELLS = 8


TOKEN_COUNTS = (
    "the clean prompt is {clean} tokens and the corrupted prompt {corrupted} tokens; "
    "patching needs the same number of tokens in both"
)


SAME_TOKEN = "the answer and the foil are the same token ({text!r}); their logit difference is always 0"


NO_DIFFERENCE = (
    "the clean and corrupted prompts give the same logit({answer}) - logit({foil}) ({value:.6g}): "
    "there is nothing for a patch to restore"
)


def check_pair(model, first: str, second: str, answer, foil):
    """Both prompts' token ids (the same count) and the answer's and foil's ``(id, text)``."""
    first_ids = check_prompt(model, first)
    second_ids = check_prompt(model, second)
    if len(first_ids) != len(second_ids):
        raise InterventionError(TOKEN_COUNTS.format(clean=len(first_ids), corrupted=len(second_ids)))
    answer_token = one_token(model, answer, "answer", InterventionError)
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


def _patch_cell(host, site: str, column: int, value) -> None:
    """Write one cell's clean slice into the running (corrupted) request, in place, at
    ``site`` of ``host`` (`_site_host`)."""
    target = getattr(host, site)
    if site in HEAD_SITES:
        target[:, :, column] = value
    else:
        target[:, column] = value


def _read_clean(model, clean: list[int], corrupted: list[int], site: str, pair: list[int]):
    """Request 1: the clean run's value at ``site`` in every layer; both end points."""
    layers = model.num_layers
    with model.trace(**ONE_GREEDY_STEP) as tracer:
        first = dict().save()
        with tracer.invoke(clean):
            values = []
            for layer in range(layers):
                values.append(_site_value(model, site, layer))
            first["values"] = values
            first["clean"] = model.logits[0, -1, pair]
        with tracer.invoke(corrupted):
            first["corrupted"] = model.logits[0, -1, pair]
    return first


def _sweep(model, corrupted: list[int], site: str, pair: list[int], cells: list, slices: list) -> list:
    """One request: a corrupted invoke per cell, each writing its clean slice.

    Each invoke ships a copy of this frame's locals, so the slices are popped one per
    invoke and nothing larger is in scope.
    """
    root = model.root_only()  # each invoke ships one block's envoys, not the whole tree
    with model.trace(**ONE_GREEDY_STEP) as tracer:
        rows = [None] * len(cells)
        rows.save()
        for index, (layer, column) in enumerate(cells):
            value = slices.pop(0)
            host = _site_host(model, site, layer)
            with tracer.invoke(corrupted):
                _patch_cell(host, site, column, value)
                rows[index] = root.logits[0, -1, pair]
    return rows


def _metric(logits) -> float:
    logits = logits.float().cpu().reshape(-1)
    return float(logits[0] - logits[1])


def patch(
    model,
    clean: str,
    corrupted: str,
    answer,
    foil,
    site: str = "layer_output",
    chunk: int = PATCH_INVOKES,
    progress: Progress = NO_PROGRESS,
) -> PatchResult:
    """Patch the clean run's ``site`` into the corrupted run, cell by cell: a `PatchResult`.

    A cell is (layer, position), or (layer, head) for ``attention_head_outputs`` (every
    position of that head). A request holds at most ``chunk`` cells, as many as fit about a
    second (`progress.Pace`; the first `FIRST_CELLS`), so a cancel is honoured within that. ``progress`` is told
    of each chunk's cells; its partial answer has NaN at the cells not yet patched.
    """
    if site not in SITES:
        raise InterventionError(UNKNOWN_SITE.format(site=site, sites=", ".join(SITES)))
    clean_ids, corrupted_ids, (answer_id, answer_text), (foil_id, foil_text) = check_pair(
        model, clean, corrupted, answer, foil
    )
    check_site(model, site)
    if chunk < 1:
        raise InterventionError(f"chunk must be at least 1, got {chunk}")
    pair = [answer_id, foil_id]
    first = _read_clean(model, clean_ids, corrupted_ids, site, pair)
    clean_metric, corrupted_metric = _metric(first["clean"]), _metric(first["corrupted"])
    if clean_metric == corrupted_metric:
        raise InterventionError(NO_DIFFERENCE.format(answer=answer_text, foil=foil_text, value=clean_metric))
    columns = model.num_heads if site in HEAD_SITES else len(clean_ids)
    cells = [(layer, column) for layer in range(model.num_layers) for column in range(columns)]
    values = first["values"]
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
            patched=patched.reshape(model.num_layers, columns).copy(),
            requests=requests,
        )

    progress.start(len(cells))
    pace = Pace(first=min(chunk, FIRST_CELLS), most=chunk)
    start = 0
    while start < len(cells):
        part = cells[start : start + pace.next()]
        slices = [
            values[layer][:, :, column].clone() if site in HEAD_SITES else values[layer][:, column].clone()
            for layer, column in part
        ]
        began = time.perf_counter()
        rows = _sweep(model, corrupted_ids, site, pair, part, slices)
        pace.took(len(part), time.perf_counter() - began)
        requests += 1
        patched[start : start + len(part)] = [_metric(row) for row in rows]
        start += len(part)
        progress.advance(start, result)
    return result()


def patch_requests(model, prompt_tokens: int, site: str = "layer_output", chunk: int = PATCH_INVOKES) -> int:
    """The fewest engine requests a sweep takes: 1 + ceil(cells / chunk) (a slow cell's
    sweep takes more, each request about a second)."""
    columns = model.num_heads if site in HEAD_SITES else prompt_tokens
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
    with model.trace(**ONE_GREEDY_STEP) as tracer:
        out = dict().save()
        with tracer.invoke(first_ids):
            mine = {"probs": [], "ids": [], "diff": []}
            _lens_reads(model, pair, k, mine)
            out["first"] = mine
        with tracer.invoke(second_ids):
            theirs = {"probs": [], "ids": [], "diff": []}
            _lens_reads(model, pair, k, theirs)
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
