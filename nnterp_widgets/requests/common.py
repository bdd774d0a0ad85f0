"""What every request shares: its limits, its refusals, its prompt and token checks, and
the prompt's `Tokens`.

A request is checked before it reaches the engine (`check_prompt`, `one_token`,
`check_size`), refused with a `RequestRefused` that says what is accepted, and its
tensors come back to the CPU inside the trace (`to_numpy`, `top_k`)::

    ids = check_prompt(model, "The Eiffel Tower is in")
    answer_id, answer_text = one_token(model, " Paris", "answer")
"""

from __future__ import annotations

import numbers
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import torch

from ..engine import parcel
from .sites import ablate_heads, check_heads


#: One trace's sampling: the prefill and one sampled token, greedy.
ONE_GREEDY_STEP = dict(temperature=0.0, max_tokens=1)
#: Top-k of each lens cell (hover) and of the model's own prediction.
LENS_K = 5


#: vLLM's engine sends a request's output as one msgspec message, limited to 4 GiB; past
#: it the engine's output thread dies and the request hangs.
MESSAGE_LIMIT = 4 << 30


#: What one request may return: a quarter of the message limit, leaving room for the
#: pickling around the saved values and anything else the step's message carries.
MAX_RESULT_BYTES = MESSAGE_LIMIT // 4


class RequestRefused(ValueError):
    """A request the engine cannot take (an empty or too long prompt, a bad layer or
    window, a result too large): said before any request reaches the engine."""


class ResultTooLarge(RequestRefused):
    """A request whose result would come near vLLM's message limit."""


#: What a prompt may be: said when it is neither.
PROMPT_KINDS = (
    "a prompt is text (a str) or its token ids (a list of ints, or a 1-D integer numpy array or torch tensor)"
)
PROMPT_EMPTY = "the prompt is empty: type some text to explore"
IDS_EMPTY = "the prompt's token id list is empty: give at least one id"
ID_OUTSIDE = "the prompt's token id {id} is outside the vocabulary (ids 0..{last})"


def prompt_ids(prompt: Any) -> list[int] | None:
    """``prompt`` as a list of token ids if it is given as ids (a list or tuple of ints, a
    1-D integer numpy array or torch tensor), None if it is text; a `TypeError` naming
    what is accepted for anything else (a list of texts, a float array, a 2-D array)."""
    if isinstance(prompt, str):
        return None
    if isinstance(prompt, (np.ndarray, torch.Tensor)):
        integer = (
            prompt.dtype in (torch.int64, torch.int32, torch.int16, torch.uint8)
            if isinstance(prompt, torch.Tensor)
            else np.issubdtype(prompt.dtype, np.integer)
        )
        if prompt.ndim != 1 or not integer:
            raise TypeError(f"{PROMPT_KINDS}; got a {prompt.ndim}-D {prompt.dtype} array")
        return [int(i) for i in prompt.tolist()]
    if isinstance(prompt, (list, tuple)) and all(
        isinstance(i, (numbers.Integral, np.integer)) and not isinstance(i, bool) for i in prompt
    ):
        return [int(i) for i in prompt]
    kinds = sorted({type(i).__name__ for i in prompt}) if isinstance(prompt, (list, tuple)) else []
    got = f"a {type(prompt).__name__} of {', '.join(kinds)}" if kinds else type(prompt).__name__
    raise TypeError(f"{PROMPT_KINDS}; got {got}")


BOS_MISSING = "this tokenizer has no BOS token to add: leave bos=None (what the tokenizer does), or give token ids"


BOS_CHOICE = (
    "bos is True (the tokenizer's BOS token first), False (no BOS token) or None (what the tokenizer does); got {bos!r}"
)


def with_bos(tokenizer, prompt: Any, bos: bool | None) -> Any:
    """``prompt`` with its BOS token as asked: unchanged for ``bos=None``; else its token
    ids (text tokenised as the engine does) with the tokenizer's BOS token first
    (``True``; added where it is not there) or with no BOS token first (``False``)."""
    if bos is None:
        return prompt
    if not isinstance(bos, bool):
        raise TypeError(BOS_CHOICE.format(bos=bos))
    ids = prompt_ids(prompt)
    if ids is None:
        ids = list(tokenizer(prompt)["input_ids"])
    first = tokenizer.bos_token_id
    if bos:
        if first is None:
            raise RequestRefused(BOS_MISSING)
        return ids if ids[:1] == [first] else [first, *ids]
    return ids[1:] if first is not None and ids[:1] == [first] else ids


def prompt_key(prompt: Any) -> str | tuple:
    """A prompt as a hashable key (text as it is, ids as a tuple)."""
    ids = prompt_ids(prompt)
    return prompt if ids is None else tuple(ids)


def check_prompt(model, prompt: Any) -> list[int]:
    """The prompt's token ids (text is tokenised as the engine does; ids are used as they
    are); a clear `RequestRefused` for one the engine cannot take, a `TypeError` for
    something that is not a prompt."""
    ids = prompt_ids(prompt)
    if ids is None:
        if not prompt.strip():
            raise RequestRefused(PROMPT_EMPTY)
        ids = model.tokenizer(prompt)["input_ids"]
    elif not ids:
        raise RequestRefused(IDS_EMPTY)
    else:
        outside = [i for i in ids if not 0 <= i < model.vocab_size]
        if outside:
            raise RequestRefused(ID_OUTSIDE.format(id=outside[0], last=model.vocab_size - 1))
    limit = model.max_model_len
    if limit is not None and len(ids) >= limit:
        raise RequestRefused(
            f"the prompt is {len(ids)} tokens, and this engine takes at most {limit - 1} "
            f"(max_model_len={limit}, less the token it predicts)"
        )
    return ids


#: What `one_token` says of a token that is not one token; ``{role}`` names it ("answer", "target").
TOKEN_EMPTY = "the {role} is empty: type one token's text, or give its id"


NOT_ONE_TOKEN = "the {role} {text!r} is {count} tokens ({pieces}), not one: give exactly one token, or a token id"


TOKEN_ID_RANGE = "the {role} token id {id} is outside the vocabulary (ids 0..{last})"


NOT_A_TOKEN = "the {role} is a token's text (a str) or a token id (an int); got {kind}"


def one_token(model, token: Any, role: str, error: type[ValueError] = RequestRefused) -> tuple[int, str]:
    """``(id, text)`` of ``token``, its text or its id, which must be exactly one token.

    Args:
        model: the engine (its tokenizer and vocabulary size).
        token: a token's text (a str) or id (an int).
        role: what the token is for, named in the error ("answer", "target").
        error: the error to raise: the asking feature's own (a `RequestRefused` by default).

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


#: Each engine's value descriptions by prompt length, the last `DESCRIBED_KEPT` lengths:
#: describing walks every value of every layer (18 ms for 32 layers on the H200's host),
#: and an engine's values do not change. Kept here, not on the engine, which travels
#: with every trace.
_DESCRIBED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


#: Lengths kept: a batch's prompts come in many lengths (a dataset of 61-73 tokens is 13),
#: and with 8 kept every prompt of such a batch was described again (3 ms each on the
#: H100's host); a description is about 100 kB.
DESCRIBED_KEPT = 64


def described(model, tokens: int | None = None) -> tuple:
    """``model.describe(tokens)``, kept per engine (`_DESCRIBED`), the least recently
    used length dropped first."""
    try:
        kept = _DESCRIBED.setdefault(model, {})
    except TypeError:  # an engine that cannot be weakly referenced: described per call
        return model.describe(tokens)
    if tokens in kept:
        kept[tokens] = kept.pop(tokens)  # the newest used stays longest
    else:
        if len(kept) >= DESCRIBED_KEPT:
            kept.pop(next(iter(kept)))
        kept[tokens] = model.describe(tokens)
    return kept[tokens]


def check_size(estimate: int, limit: int, advice: str) -> None:
    """Refuse, before running, a request whose result would be ``estimate`` bytes."""
    if estimate > limit:
        raise ResultTooLarge(
            f"this request would return about {estimate / 2**20:,.1f} MiB, over the "
            f"{limit / 2**20:,.1f} MiB one engine message may carry here (vLLM's limit is "
            f"{MESSAGE_LIMIT / 2**30:.0f} GiB); {advice}. The engine is still serving."
        )


def checked(model, prompt: str, ablate: Sequence = ()) -> tuple[list[int], tuple[tuple[int, int], ...]]:
    """A request's prompt ids and its ablated heads, each checked (`check_prompt`, `check_ablate`)."""
    return check_prompt(model, prompt), check_ablate(model, ablate)


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


def ablate_block(model, heads: tuple, layer: int) -> None:
    """Zero ``heads``' outputs in block ``layer``: nnsight takes an invoke's reads and
    writes in execution order, so ablation happens block by block between the reads."""
    if any(index == layer for index, _ in heads):
        ablate_heads(model, heads, layer=layer)


def top_k(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax then top-k over the last axis, on the CPU."""
    top = torch.softmax(logits.float(), dim=-1).topk(k, dim=-1)
    return top.values.cpu(), top.indices.cpu()


#: Logits one lens product may hold at once: rows of every layer's window are stacked
#: and projected in pieces of this many bytes (the unembedding's weight read once a
#: piece, where a product per layer reads it once a layer: 30 times for one row each).
LENS_PIECE_BYTES = 64 << 20


def stacked_top_k(model, rows: list, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Inside a trace: the lens's top-k of every layer's ``[window, hidden]`` streams in
    ``rows`` (one width for all), as `top_k` does it, from a few stacked products
    (`LENS_PIECE_BYTES`): ``(probs, ids)``, each ``[layers, window, k]`` (two arrays to
    return, not two a layer: `crossing`)."""
    streams = torch.cat(rows)
    piece = max(1, LENS_PIECE_BYTES // (4 * model.vocab_size))
    probs, ids = [], []
    for start in range(0, streams.shape[0], piece):
        found = top_k(model.project_on_vocab(streams[start : start + piece]), k)
        probs.append(found[0])
        ids.append(found[1])
    shape = (len(rows), rows[0].shape[0], -1)
    return crossing(torch.cat(probs).reshape(shape)), crossing(torch.cat(ids).reshape(shape))


def crossing(tensor: torch.Tensor) -> np.ndarray:
    """A result as a request sends it from the worker: a numpy array on the CPU (float32
    or integers; numpy has no bfloat16). From the engine's own processes to the kernel's,
    an array crosses at about half a tensor's cost by the megabyte (8-16 MB: 1.0-2.2 ms a
    MB against 2.0-3.7) and at almost none by the piece (a small tensor about 0.1 ms),
    bench/result_bytes.py; on a GPU the prompt request's 9 MB cost about 5 ms a MB as
    tensors (docs/gpu.md, run 11). A large one crosses through shared memory
    (`engine.parcels`)."""
    return parcel(tensor.detach().cpu().numpy())


def to_numpy(tensor: Any, dtype) -> np.ndarray:
    """A returned tensor as a numpy array, whatever device it came back on."""
    if isinstance(tensor, torch.Tensor):
        tensor = tensor.detach().cpu().numpy()
    return np.asarray(tensor).astype(dtype, copy=False)


#: Each tokenizer's decoded token texts, kept across requests: decoding a token one at a
#: time costs microseconds, and a long prompt's thousands of them every request add up.
_TEXTS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class _Texts:
    """One tokenizer's token texts by id, each decoded once: a table numpy indexes, so a
    lens's thousands of cells are one lookup, not a Python call each (the 8B's 512-token
    prompt request spent milliseconds there, docs/gpu.md run 13)."""

    __slots__ = ("table", "known", "lock")

    def __init__(self):
        self.table = np.empty(0, dtype=object)
        self.known = np.zeros(0, dtype=bool)
        self.lock = threading.Lock()  # the session's worker and the views both ask

    def of(self, tokenizer, ids: np.ndarray) -> np.ndarray:
        """The texts of ``ids`` (non-negative integers), an object array of their shape."""
        with self.lock:
            return self._of(tokenizer, ids)

    def _of(self, tokenizer, ids: np.ndarray) -> np.ndarray:
        top = int(ids.max()) + 1 if ids.size else 0
        if top > len(self.table):
            size = max(top, 2 * len(self.table))
            table, known = np.empty(size, dtype=object), np.zeros(size, dtype=bool)
            table[: len(self.table)], known[: len(self.known)] = self.table, self.known
            self.table, self.known = table, known
        missing = np.unique(ids[~self.known[ids]])
        for i in missing.tolist():
            self.table[i] = tokenizer.decode([i])
        self.known[missing] = True
        return self.table[ids]


def _texts(tokenizer) -> _Texts:
    try:
        return _TEXTS.setdefault(tokenizer, _Texts())
    except TypeError:  # a tokenizer that cannot be weakly referenced: decoded per call
        return _Texts()


def _texts_of(tokenizer, ids: np.ndarray) -> list:
    """The texts of an id array, as ``ids.tolist()`` nests them."""
    return _texts(tokenizer).of(tokenizer, ids).tolist()


def token_text(tokenizer) -> Callable[[int], str]:
    """``text(id)``: one token's text, each decoded once per tokenizer (`_TEXTS`)."""
    texts = _texts(tokenizer)

    def text(i: int) -> str:
        i = int(i)
        if i < len(texts.known) and texts.known[i]:
            return texts.table[i]
        return texts.of(tokenizer, np.array([i]))[0]

    return text


def texts_of(model, ids: Any) -> tuple:
    """The token texts of an array of ids (a tensor, an array or nested lists), as nested
    tuples of its shape: ``[layers, positions, k]`` ids -> a tuple of tuples of tuples."""
    array = to_numpy(ids, np.int64)

    def nest(items: list, depth: int) -> tuple:
        return tuple(items) if depth == 1 else tuple(nest(item, depth - 1) for item in items)

    return nest(_texts_of(model.tokenizer, array), array.ndim)


def tokens_of(model, input_ids: Any) -> Tokens:
    """The `Tokens` of ``input_ids`` (a tensor, an array or a list of ids); a character
    split over several tokens is said once (`whole_characters`)."""
    array = to_numpy(input_ids, np.int64).reshape(-1)
    ids, texts = tuple(array.tolist()), tuple(_texts_of(model.tokenizer, array))
    return Tokens(ids, whole_characters(model.tokenizer, ids, texts))


#: What a tokenizer decodes a lone piece of a character to (a byte-level token of CJK or
#: an emoji holds one to three of its UTF-8 bytes).
REPLACEMENT = "\ufffd"
#: The most tokens one character is split over (UTF-8 takes at most four bytes).
MOST_PIECES = 4


def whole_characters(tokenizer, ids: tuple, texts: tuple) -> tuple:
    """``texts`` with each character that is split over tokens given whole to the token
    that completes it, and the tokens before it holding what they complete (often
    nothing): the texts still join to the prompt's text, and no "\ufffd" is shown where
    the tokens together decode cleanly."""
    texts = list(texts)
    index = 0
    while index < len(ids):
        if REPLACEMENT not in texts[index]:
            index += 1
            continue
        for last in range(index + 1, min(len(ids), index + MOST_PIECES)):
            whole = tokenizer.decode(list(ids[index : last + 1]))
            # Whole when the run decodes cleanly (a piece never completed stays as it was).
            if REPLACEMENT not in whole:
                prefixes = [
                    tokenizer.decode(list(ids[index:stop])).rstrip(REPLACEMENT) for stop in range(index + 1, last + 1)
                ]
                prefixes.append(whole)
                starts = ["", *prefixes[:-1]]
                if all(upto.startswith(said) for said, upto in zip(starts, prefixes, strict=True)):
                    texts[index : last + 1] = [upto[len(said) :] for said, upto in zip(starts, prefixes, strict=True)]
                    index = last  # else a decode that rewrites what came before: the run stays as it was
                break
        index += 1
    return tuple(texts)


@dataclass(frozen=True)
class Tokens:
    """A prompt's tokens: ids and their decoded text, one entry per position."""

    ids: tuple[int, ...]
    texts: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.ids)

    def labels(self) -> list[str]:
        """One label per position, distinct even where the text repeats (``"in·4"``)."""
        return [f"{text}·{index}" for index, text in enumerate(self.texts)]
