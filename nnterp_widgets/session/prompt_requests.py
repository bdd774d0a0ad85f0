"""The engine requests behind the panels: what a view needs, and nothing it does not show.

* `run_prompt`: one trace that paints the explorer: the tokens, the model's top-k
  prediction, the logit lens over a window of positions (``project_on_vocab`` on those
  positions only), and the shown layer's pattern, quantised to one byte a cell
  (max-pooled to at most `PATTERN_SIDE` cells a side on a longer prompt), with
  per-head thumbnails for the head grid. The module tree's shapes come from the
  engine's value descriptions, without a request.
* `run_attention`: one layer's pattern (a layer switch), or a window of its exact cells
  (a zoom into a pooled pattern); `run_lens`: another window of
  the lens; `run_value`: one value's summary (a click in the module tree).

Every tensor is moved to the CPU inside the trace, before it is saved, so it leaves the
engine's worker as it will be used. Before a request runs, the size of what it returns
is estimated: one that would come near vLLM's message limit is refused with a clear
error, and the engine carries on.
"""

from __future__ import annotations

import math
import numbers
import weakref
from typing import Any, Callable, Sequence

import numpy as np
import torch

from .ablation import ablate_heads, check_heads
from .intervention_results import ablation_delta
from .panels import (
    PATTERN_SIDE,
    THUMBNAIL_SIDE,
    AttentionPanel,
    LensPanel,
    PromptResult,
    Tokens,
    ValueSummary,
    pattern_block,
)

#: Rows (token positions) and columns of a value's preview.
PREVIEW_ROWS = 32
PREVIEW_COLS = 16
#: Top-k of each lens cell (hover) and of the model's own prediction.
LENS_K = 5
#: Positions the lens shows unless told otherwise: the last ones.
LENS_WINDOW = 32
#: The widest lens window one request computes (each position costs a full-vocabulary
#: projection per layer).
MAX_LENS_WINDOW = 128
#: vLLM's engine sends a request's output as one msgspec message, limited to 4 GiB; past
#: it the engine's output thread dies and the request hangs.
MESSAGE_LIMIT = 4 << 30
#: What one request may return: a quarter of the message limit, leaving room for the
#: pickling around the saved values and anything else the step's message carries.
MAX_RESULT_BYTES = MESSAGE_LIMIT // 4


class ProbeError(ValueError):
    """A request the engine cannot take (an empty or too long prompt, a bad layer or
    window, a result too large): said before any request reaches the engine."""


class ResultTooLarge(ProbeError):
    """A request whose result would come near vLLM's message limit."""


# -- checks (client side, before any request) ----------------------------------------


def check_prompt(model, prompt: str) -> list[int]:
    """The prompt's token ids; a clear `ProbeError` for one the engine cannot take."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise ProbeError("the prompt is empty: type some text to explore")
    ids = model.tokenizer(prompt)["input_ids"]
    limit = model.max_model_len
    if limit is not None and len(ids) >= limit:
        raise ProbeError(
            f"the prompt is {len(ids)} tokens, and this engine takes at most {limit - 1} "
            f"(max_model_len={limit}, less the token it predicts)"
        )
    return ids


#: What `one_token` says of a token that is not one token; ``{role}`` names it ("answer", "target").
TOKEN_EMPTY = "the {role} is empty: type one token's text, or give its id"
NOT_ONE_TOKEN = "the {role} {text!r} is {count} tokens ({pieces}), not one: give exactly one token, or a token id"
TOKEN_ID_RANGE = "the {role} token id {id} is outside the vocabulary (ids 0..{last})"
NOT_A_TOKEN = "the {role} is a token's text (a str) or a token id (an int); got {kind}"


def one_token(model, token: Any, role: str, error: type[ValueError] = ProbeError) -> tuple[int, str]:
    """``(id, text)`` of ``token``, its text or its id, which must be exactly one token.

    Args:
        model: the engine (its tokenizer and vocabulary size).
        token: a token's text (a str) or id (an int).
        role: what the token is for, named in the error ("answer", "target").
        error: the error to raise: the asking feature's own (a `ProbeError` by default).

    Returns:
        The token's id and its text.
    """
    tokenizer = model.tokenizer
    if isinstance(token, str):
        if token == "":
            raise error(TOKEN_EMPTY.format(role=role))
        ids = tokenizer(token, add_special_tokens=False)["input_ids"]
        if len(ids) != 1:
            pieces = " + ".join(repr(tokenizer.decode([i])) for i in ids)
            raise error(NOT_ONE_TOKEN.format(role=role, text=token, count=len(ids), pieces=pieces))
        token = ids[0]
    elif isinstance(token, bool) or not isinstance(token, numbers.Integral):
        raise error(NOT_A_TOKEN.format(role=role, kind=type(token).__name__))
    elif not 0 <= int(token) < model.vocab_size:
        raise error(TOKEN_ID_RANGE.format(role=role, id=int(token), last=model.vocab_size - 1))
    return int(token), tokenizer.decode([int(token)])


def lens_window(tokens: int, window: Any = None) -> tuple[int, int]:
    """``(start, stop)`` of the lens for ``tokens`` positions.

    ``window``: ``None`` (the last `LENS_WINDOW` positions), an int ``n`` (the last
    ``n``), or ``(start, stop)``; at most `MAX_LENS_WINDOW` wide.
    """
    if window is None or isinstance(window, (int, np.integer)):
        width = LENS_WINDOW if window is None else int(window)
        if not 1 <= width <= MAX_LENS_WINDOW:
            raise ProbeError(f"a lens window is 1..{MAX_LENS_WINDOW} positions wide; got {width}")
        return max(0, tokens - width), tokens
    start, stop = (int(n) for n in window)
    if not 0 <= start < stop <= tokens:
        raise ProbeError(f"lens window {start}..{stop} is outside this prompt's positions 0..{tokens}")
    if stop - start > MAX_LENS_WINDOW:
        raise ProbeError(
            f"lens window {start}..{stop} is {stop - start} positions wide; at most "
            f"{MAX_LENS_WINDOW} at once (each costs a full-vocabulary projection per layer)"
        )
    return start, stop


#: Each engine's value descriptions by prompt length, the last `DESCRIBED_KEPT` lengths:
#: describing walks every value of every layer (18 ms for 32 layers on the H200's host),
#: and an engine's values do not change. Kept here, not on the engine, which travels
#: with every trace.
_DESCRIBED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
DESCRIBED_KEPT = 8


def described(model, tokens: int | None = None) -> tuple:
    """``model.describe(tokens)``, kept per engine (`_DESCRIBED`)."""
    try:
        kept = _DESCRIBED.setdefault(model, {})
    except TypeError:  # an engine that cannot be weakly referenced: described per call
        return model.describe(tokens)
    if tokens not in kept:
        if len(kept) >= DESCRIBED_KEPT:
            kept.pop(next(iter(kept)))
        kept[tokens] = model.describe(tokens)
    return kept[tokens]


def pattern_layers(model) -> tuple[int, ...]:
    """The layers whose pattern the engine serves."""
    return tuple(v.layer for v in described(model) if v.name == "attention_probabilities" and v.available)


def check_layer(model, layer: int) -> None:
    layers = pattern_layers(model)
    if layer not in layers:
        span = f"layers {layers[0]}..{layers[-1]}" if layers else "no layer (this family serves no pattern)"
        raise ProbeError(f"no attention pattern for layer {layer}: this model has a pattern on {span}")


def pattern_bytes(heads: int, tokens: int, side: int = PATTERN_SIDE, window: tuple | None = None) -> int:
    """What one layer's shipped pattern (quantised, pooled to ``side`` cells a side, or a
    ``side``-wide ``window`` from ``(query_start, key_start)``) and its thumbnails weigh."""
    if window is None:
        rows = cols = math.ceil(tokens / pattern_block(tokens, side))
    else:
        rows, cols = (min(side, tokens - start) for start in window)
    thumb = min(tokens, THUMBNAIL_SIDE)
    return heads * rows * cols + heads * thumb * thumb * 4


def check_window(tokens: int, window) -> tuple[int, int]:
    """``window`` as ``(query_start, key_start)`` inside a ``tokens``-token prompt."""
    try:
        query, key = (int(n) for n in window)
    except (TypeError, ValueError):
        raise ProbeError(f"a pattern window is (query_start, key_start); got {window!r}") from None
    if not (0 <= query < tokens and 0 <= key < tokens):
        raise ProbeError(f"pattern window ({query}, {key}) is outside this prompt's positions 0..{tokens - 1}")
    return query, key


def lens_bytes(layers: int, window: int, k: int = LENS_K) -> int:
    return layers * window * k * (4 + 8)


def check_size(estimate: int, limit: int, advice: str) -> None:
    """Refuse, before running, a request whose result would be ``estimate`` bytes."""
    if estimate > limit:
        raise ResultTooLarge(
            f"this request would return about {estimate / 2**20:,.1f} MiB, over the "
            f"{limit / 2**20:,.1f} MiB one engine message may carry here (vLLM's limit is "
            f"{MESSAGE_LIMIT / 2**30:.0f} GiB); {advice}. The engine is still serving."
        )


def check_ablate(model, ablate: Sequence) -> tuple[tuple[int, int], ...]:
    """``ablate`` as sorted, distinct ``(layer, head)`` pairs, checked against the model."""
    return check_heads(model, ablate) if ablate else ()


#: Values of a block that its own heads' ablation cannot change (read before the heads'
#: outputs exist), so a request reading them ablates that block after the read.
BEFORE_HEAD_OUTPUTS = (
    "layer_input",
    "attention_queries",
    "attention_keys",
    "attention_values",
    "attention_scores",
    "attention_probabilities",
    "attention_head_outputs",
)


def _ablate(model, heads: tuple, layer: int) -> None:
    """Zero ``heads``' outputs in block ``layer``: nnsight takes an invoke's reads and
    writes in execution order, so ablation happens block by block between the reads."""
    if any(index == layer for index, _ in heads):
        ablate_heads(model, heads, layer=layer)


# -- in the engine's worker (called inside a trace) -----------------------------------


def top_k(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax then top-k over the last axis, on the CPU."""
    top = torch.softmax(logits.float(), dim=-1).topk(k, dim=-1)
    return top.values.cpu(), top.indices.cpu()


def pattern_payload(
    probabilities: torch.Tensor, block: int = 1, window: tuple | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``[1, heads, q, k]`` probabilities -> (uint8 ``round(p * 255)`` cells, pooled thumbnails), on the CPU.

    The cells: every one (``block == 1``), each ``block``-token square's maximum, or the
    exact ones in ``window`` ``(q0, q1, k0, k1)``; pooled and cut on the engine's device,
    so only what is shipped leaves it.
    """
    pattern = probabilities[0].float()
    if window is not None:
        q0, q1, k0, k1 = window
        cells = pattern[:, q0:q1, k0:k1]
    elif block > 1:
        # ceil_mode with no padding: a last, narrower block is the maximum of what it holds.
        cells = torch.nn.functional.max_pool2d(pattern, block, block, ceil_mode=True)
    else:
        cells = pattern
    quantized = (cells * 255).round_().to(torch.uint8).cpu()
    rows, cols = pattern.shape[-2:]
    block = (-(-rows // THUMBNAIL_SIDE), -(-cols // THUMBNAIL_SIDE))
    # ceil_mode with no padding averages a last, narrower block over what it holds
    # (as panels.mean_pool does).
    thumbnails = torch.nn.functional.avg_pool2d(pattern.unsqueeze(0), block, block, ceil_mode=True)[0]
    return quantized, thumbnails.cpu()


def summarize(value: Any, axis: int | None, rows: int = PREVIEW_ROWS, cols: int = PREVIEW_COLS) -> dict:
    """Shape, dtype, stats and a ``[rows, cols]`` preview (token positions on the rows), on the CPU."""
    if isinstance(value, torch.Size):
        return {
            "shape": [len(value)],
            "dtype": "torch.Size",
            "stats": {},
            "preview": torch.tensor([list(value)], dtype=torch.float32),
            "rows": [0],
            "total": len(value),
        }
    tensor = value.detach()
    as_float = tensor.float()
    finite = as_float[torch.isfinite(as_float)]
    stats = {
        "min": float(finite.min()) if finite.numel() else None,
        "max": float(finite.max()) if finite.numel() else None,
        "mean": float(finite.mean()) if finite.numel() else None,
        "norm": float(finite.norm()) if finite.numel() else None,
    }
    axis = 0 if axis is None else axis
    flat = as_float.squeeze(0) if as_float.dim() > 1 and as_float.shape[0] == 1 and axis > 0 else as_float
    token_axis = axis - 1 if flat.dim() < as_float.dim() else axis
    if flat.dim() == 1:
        flat = flat.unsqueeze(-1) if token_axis == 0 else flat.unsqueeze(0)
    else:
        flat = flat.movedim(token_axis, 0).reshape(flat.shape[token_axis], -1)
    positions = flat.shape[0]
    keep = list(range(min(rows, positions)))
    if positions > rows:  # the first rows and the last one, which is the one predicting
        keep = keep[:-1] + [positions - 1]
    preview = flat[keep, :cols].masked_fill(~torch.isfinite(flat[keep, :cols]), 0.0)
    return {
        "shape": list(tensor.shape),
        "dtype": str(tensor.dtype).replace("torch.", ""),
        "stats": stats,
        "preview": preview.contiguous().cpu(),
        "rows": keep,
        "total": int(flat.shape[1]),
    }


# -- the requests ------------------------------------------------------------------------


def run_prompt(
    model,
    prompt: str,
    *,
    layer: int | None = None,
    window: Any = None,
    ablate: Sequence = (),
    k: int = LENS_K,
    max_bytes: int = MAX_RESULT_BYTES,
    side: int = PATTERN_SIDE,
) -> PromptResult:
    """What the explorer paints first, for ``prompt``: one trace.

    ``layer``: the layer whose pattern comes with it (the first that has one by
    default; max-pooled to ``side`` cells a side past ``side`` tokens); ``window``: the
    lens's positions (see `lens_window`); ``ablate``: heads ``(layer, head)`` zeroed
    before the reads, and then a second invoke of the same trace runs the prompt clean,
    for the result's ``ablation`` (an `AblationDelta`).
    """
    ids = check_prompt(model, prompt)
    heads = check_ablate(model, ablate)
    count = len(ids)
    start, stop = lens_window(count, window)
    layers = pattern_layers(model)
    shown = (layers[0] if layers else None) if layer is None else int(layer)
    if shown is not None:
        check_layer(model, shown)
    num_layers, k = model.num_layers, int(k)
    block = pattern_block(count, side)
    estimate = lens_bytes(num_layers, stop - start, k) + count * 8
    if shown is not None:
        estimate += pattern_bytes(model.num_heads, count, side)
    if heads:
        estimate += 2 * 4 * model.vocab_size  # both runs' next-token probabilities
    check_size(estimate, max_bytes, "shorten the prompt or narrow the lens window")
    with model.trace(temperature=0.0, max_tokens=1) as tracer:
        out = dict().save()
        with tracer.invoke(ids):  # the prompt (tokenised once, here), with the heads ablated if any
            out["input_ids"] = model.input_ids[0].cpu()
            out["lens"] = []
            for index in range(num_layers):
                layer_block = model.layers[index]
                if index == shown:
                    out["pattern"] = pattern_payload(layer_block.self_attn.attention_probabilities, block)
                _ablate(model, heads, index)
                out["lens"].append(top_k(model.project_on_vocab(layer_block.layer_output[0, start:stop]), k))
            out["model_top"] = top_k(model.logits[0, -1], k)
            if heads:
                out["ablated"] = model.next_token_probs[0].float().cpu()
        if heads:
            with tracer.invoke(ids):  # the clean run: one more invoke, not one more request
                out["clean"] = model.next_token_probs[0].float().cpu()
    ablation = ablation_delta(out["clean"], out["ablated"], heads) if heads else None
    tokens = tokens_of(model, out["input_ids"])  # the ids the check made: the engine was given them
    lens = _lens(model, tokens, out["lens"], out["model_top"], start)
    attention = _attention(tokens, shown, num_layers, out["pattern"], block) if shown is not None else None
    shapes = {value.id: value.shape for value in described(model, count)}
    nbytes = lens.top_ids.nbytes + lens.top_probs.nbytes + (attention.nbytes if attention is not None else 0)
    return PromptResult(prompt, tokens, lens, attention, layers, shapes, heads, int(nbytes + count * 8), ablation)


def run_attention(
    model,
    prompt: str,
    layer: int,
    *,
    window: Any = None,
    ablate: Sequence = (),
    max_bytes: int = MAX_RESULT_BYTES,
    side: int = PATTERN_SIDE,
) -> AttentionPanel:
    """Layer ``layer``'s pattern for ``prompt``: one trace.

    ``window=None``: the whole pattern as the prompt request ships it (a layer switch);
    ``window=(query_start, key_start)``: the exact cells of at most ``side`` queries and
    keys from there (a zoom).
    """
    ids, heads, layer = _pattern_inputs(model, prompt, layer, ablate)
    count = len(ids)
    origin = None if window is None else check_window(count, window)
    check_size(pattern_bytes(model.num_heads, count, side, origin), max_bytes, "shorten the prompt")
    block, cut = pattern_block(count, side), None
    if origin is not None:
        block, (q0, k0) = 1, origin
        cut = (q0, min(count, q0 + side), k0, min(count, k0 + side))
    return _pattern_request(model, ids, layer, heads, block, cut, origin or (0, 0))


def run_attention_row(
    model, prompt: str, layer: int, query: int, *, ablate: Sequence = (), max_bytes: int = MAX_RESULT_BYTES
) -> AttentionPanel:
    """Query ``query``'s exact weights over every key, in every head of layer ``layer``:
    one trace, a one-row window (the token view of a prompt past the pattern side, whose
    shipped pattern is pooled)."""
    ids, heads, layer = _pattern_inputs(model, prompt, layer, ablate)
    count = len(ids)
    query, _ = check_window(count, (query, 0))
    thumb = min(count, THUMBNAIL_SIDE)
    check_size(model.num_heads * (count + thumb * thumb * 4), max_bytes, "shorten the prompt")
    return _pattern_request(model, ids, layer, heads, 1, (query, query + 1, 0, count), (query, 0))


def _pattern_inputs(model, prompt: str, layer: Any, ablate: Sequence) -> tuple:
    """A pattern request's checked inputs: the prompt's ids, the ablated heads, the layer."""
    ids = check_prompt(model, prompt)
    heads = check_ablate(model, ablate)
    layer = int(layer)
    check_layer(model, layer)
    return ids, heads, layer


def _pattern_request(model, ids, layer: int, heads: tuple, block: int, cut, origin: tuple) -> AttentionPanel:
    """One trace reading layer ``layer``'s pattern, pooled in ``block`` s or ``cut`` to a
    window, with ``heads`` ablated in the layers before it."""
    with model.trace(ids, temperature=0.0, max_tokens=1):
        out = dict().save()
        out["input_ids"] = model.input_ids[0].cpu()
        for index in range(layer):
            _ablate(model, heads, index)
        out["pattern"] = pattern_payload(model.layers[layer].self_attn.attention_probabilities, block, cut)
    tokens = tokens_of(model, out["input_ids"])
    return _attention(tokens, layer, model.num_layers, out["pattern"], block, origin)


def run_lens(
    model,
    prompt: str,
    start: int,
    stop: int,
    *,
    ablate: Sequence = (),
    k: int = LENS_K,
    max_bytes: int = MAX_RESULT_BYTES,
) -> LensPanel:
    """The lens over positions ``start .. stop - 1`` of ``prompt``: one trace."""
    ids = check_prompt(model, prompt)
    heads = check_ablate(model, ablate)
    start, stop = lens_window(len(ids), (start, stop))
    num_layers, k = model.num_layers, int(k)
    check_size(lens_bytes(num_layers, stop - start, k), max_bytes, "narrow the lens window")
    with model.trace(ids, temperature=0.0, max_tokens=1):
        out = dict().save()
        out["input_ids"] = model.input_ids[0].cpu()
        out["lens"] = []
        for index in range(num_layers):
            _ablate(model, heads, index)
            out["lens"].append(top_k(model.project_on_vocab(model.layers[index].layer_output[0, start:stop]), k))
        out["model_top"] = top_k(model.logits[0, -1], k)
    return _lens(model, tokens_of(model, out["input_ids"]), out["lens"], out["model_top"], start)


def run_value(
    model, prompt: str, value_id: str, *, ablate: Sequence = (), max_bytes: int = MAX_RESULT_BYTES
) -> ValueSummary:
    """A summary of one standard value (``model.model.layers.0.mlp.mlp_output``) for ``prompt``."""
    ids = check_prompt(model, prompt)
    heads = check_ablate(model, ablate)
    found = {value.id: value for value in described(model)}
    value = found.get(value_id)
    if value is None:
        raise ProbeError(f"no standard value {value_id!r} on this model")
    if not value.available:
        raise ProbeError(f"{value.standard_path} is not served on this engine: {value.reason}")
    check_size(PREVIEW_ROWS * PREVIEW_COLS * 4, max_bytes, "ask for a smaller preview")
    host, name, axis = value.host(model), value.name, value.token_axis
    # Blocks ablated before the read: those before the value's own, and its own too
    # where the value comes after the heads' outputs (root values: every block).
    if value.layer is None:
        before = model.num_layers if name in ("logits", "next_token_probs") else 0
    else:
        before = value.layer + (name not in BEFORE_HEAD_OUTPUTS)
    with model.trace(ids, temperature=0.0, max_tokens=1):
        out = dict().save()
        for index in range(before):
            _ablate(model, heads, index)
        out["summary"] = summarize(getattr(host, name), axis)
    found = out["summary"]
    return ValueSummary(
        id=value_id,
        shape=tuple(found["shape"]),
        dtype=found["dtype"],
        stats=found["stats"],
        preview=_numpy(found["preview"], np.float32),
        row_tokens=tuple(found["rows"]),
        total_cols=found["total"],
    )


# -- building the panels (client side) -------------------------------------------------


def _numpy(tensor: Any, dtype) -> np.ndarray:
    """A returned tensor as a numpy array, whatever device it came back on."""
    if isinstance(tensor, torch.Tensor):
        tensor = tensor.detach().cpu().numpy()
    return np.asarray(tensor).astype(dtype, copy=False)


#: Each tokenizer's decoded token texts, kept across requests: decoding a token one at a
#: time costs microseconds, and a long prompt's thousands of them every request add up.
_TEXTS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def token_text(tokenizer) -> Callable[[int], str]:
    """``text(id)``: one token's text, each decoded once per tokenizer (`_TEXTS`)."""
    try:
        known = _TEXTS.setdefault(tokenizer, {})
    except TypeError:  # a tokenizer that cannot be weakly referenced: decoded per call
        known = {}

    def text(i: int) -> str:
        found = known.get(i)
        if found is None:
            found = known[int(i)] = tokenizer.decode([int(i)])
        return found

    return text


def texts_of(model, ids: Any) -> tuple:
    """The token texts of an array of ids (a tensor, an array or nested lists), as nested
    tuples of its shape: ``[layers, positions, k]`` ids -> a tuple of tuples of tuples."""
    text = token_text(model.tokenizer)

    def nest(items: list) -> tuple:
        return tuple(nest(item) if isinstance(item, list) else text(item) for item in items)

    return nest(_numpy(ids, np.int64).tolist())


def tokens_of(model, input_ids: Any) -> Tokens:
    """The `Tokens` of ``input_ids`` (a tensor, an array or a list of ids)."""
    ids = tuple(_numpy(input_ids, np.int64).reshape(-1).tolist())
    text = token_text(model.tokenizer)
    return Tokens(ids, tuple(text(i) for i in ids))


def _attention(
    tokens: Tokens, layer: int, num_layers: int, payload: tuple, block: int = 1, origin: tuple = (0, 0)
) -> AttentionPanel:
    quantized, thumbnails = payload
    return AttentionPanel(
        tokens, layer, num_layers, _numpy(quantized, np.uint8), _numpy(thumbnails, np.float32), block, *origin
    )


def _lens(model, tokens: Tokens, rows: list, model_top: tuple, start: int) -> LensPanel:
    probs = np.stack([_numpy(p, np.float32) for p, _ in rows])
    top_ids = np.stack([_numpy(i, np.int64) for _, i in rows])
    model_probs, model_ids = model_top
    return LensPanel(
        tokens,
        top_ids,
        probs,
        texts_of(model, top_ids),
        _numpy(model_ids, np.int64),
        _numpy(model_probs, np.float32),
        start,
    )
