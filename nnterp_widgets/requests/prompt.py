"""What the explorer paints first for a prompt, in one trace: `PromptResult`, `run_prompt`.

The tokens, the model's top-k prediction, the logit lens over a window of positions
(``project_on_vocab`` on those positions only), and the shown layer's pattern with its
thumbnails; with heads ablated, a second invoke of the same trace runs the prompt clean::

    result = run_prompt(model, "The Eiffel Tower is in the city of")
    result.lens, result.attention, result.shapes
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from .sites import ablation_delta
from .attention import (
    PATTERN_SIDE,
    AttentionPattern,
    attention_pattern,
    check_layer,
    pattern_block,
    pattern_bytes,
    pattern_layers,
    pattern_payload,
)
from .question import Question
from .common import (
    LENS_K,
    MAX_RESULT_BYTES,
    Tokens,
    ablate_block,
    checked,
    check_size,
    crossing,
    described,
    tokens_of,
    stacked_top_k,
    top_k,
)
from .kept import keep as keep_streams
from .lens import LensGrid, from_end, lens_bytes, lens_grid, lens_window


@dataclass(frozen=True)
class PromptResult:
    """What one prompt request gave: what the explorer paints first.

    The tokens, the lens over a window of positions (the model's own prediction
    included), the shown layer's pattern, and the standard values' shapes for this
    prompt (from the engine's description). Other layers, lens windows and value
    previews are further requests (see `Session`).
    """

    prompt: str
    tokens: Tokens
    lens: LensGrid
    #: The shown layer's pattern; ``None`` where the family serves none.
    attention: AttentionPattern | None = None
    #: The layers a pattern can be asked for (those serving ``attention_probabilities``).
    pattern_layers: tuple[int, ...] = ()
    #: Value id -> shape for this prompt (``None`` where unknown or not served).
    shapes: dict = field(default_factory=dict)
    #: Heads ablated for this prompt, ``((layer, head), ...)``.
    ablate: tuple = ()
    #: Bytes of the arrays the engine returned.
    nbytes: int = 0
    #: With heads ablated: the ablated run against the clean one (an `AblationDelta`,
    #: from a second invoke of the same trace); else None.
    ablation: Any = None
    #: The key the engine's worker keeps this prompt's streams under (`kept`), or None.
    kept: str | None = None

    @property
    def patterns(self) -> dict:
        """``{layer: [heads, rows, cols] float32}`` of the layer this result holds (its
        cells as shipped: block maxima past `PATTERN_SIDE` tokens)."""
        return {} if self.attention is None else {self.attention.layer: self.attention.pattern}

    def to_pandas(self):
        """The lens's table (`LensGrid.to_pandas`): what the prompt request measured per cell."""
        return self.lens.to_pandas()


def prompt_plan(
    model,
    prompt: Any,
    *,
    layer: int | None = None,
    window: Any = None,
    ablate: Sequence = (),
    k: int = LENS_K,
    max_bytes: int = MAX_RESULT_BYTES,
    side: int = PATTERN_SIDE,
    keep: str | None = None,
) -> tuple[list[int], tuple, tuple]:
    """The prompt request's checks, before any trace: ``(ids, reads_args, build_args)``
    for `prompt_reads` (inside the prompt's invoke) and `prompt_result` (after)."""
    ids, heads = checked(model, prompt, ablate)
    count = len(ids)
    start, stop = lens_window(count, window)
    layers = pattern_layers(model)
    shown = (layers[0] if layers else None) if layer is None else int(layer)
    if shown is not None:
        check_layer(model, shown)
    k = int(k)
    block = pattern_block(count, side)
    check_size(
        prompt_bytes(model, count, stop - start, k, shown is not None, side, bool(heads)),
        max_bytes,
        "shorten the prompt or narrow the lens window",
    )
    return ids, (shown, block, start, stop, k, heads, keep), (prompt, heads, start, shown, block)


def prompt_bytes(
    model, count: int, width: int, k: int, pattern: bool, side: int = PATTERN_SIDE, ablated: bool = False
) -> int:
    """What one prompt request returns: the lens over ``width`` positions, the ids, the
    pattern (if ``pattern``) and, ablated, both runs' next-token probabilities."""
    estimate = lens_bytes(model.num_layers, width, k) + count * 8
    if pattern:
        estimate += pattern_bytes(model.num_heads, count, side)
    if ablated:
        estimate += 2 * 4 * model.vocab_size
    return estimate


def prompt_reads(model, shown, block: int, start: int, stop: int, k: int, heads, keep) -> dict:
    """Inside the prompt's invoke: the ids, the shown layer's pattern, each layer's lens
    over ``start:stop`` (the heads ablated before their layer's reads), the model's top-k;
    with ``keep``, every layer's stream kept in the worker (`kept`)."""
    out = {"input_ids": crossing(model.input_ids[0])}
    streams, windows = [], []
    for index in range(model.num_layers):
        layer_block = model.layers[index]
        if index == shown:
            attention = layer_block.self_attn
            out["pattern"] = pattern_payload(attention, attention.attention_queries, attention.attention_keys, block)
        ablate_block(model, heads, index)
        stream = layer_block.layer_output[0]
        if keep is not None:
            streams.append(stream)
        windows.append(stream[start:stop])
    out["lens"] = stacked_top_k(model, windows, k)
    out["model_top"] = tuple(crossing(part) for part in top_k(model.logits[0, -1], k))
    if keep is not None:
        keep_streams(keep, streams, *model.lens_modules())
        out["kept"] = keep
    if heads:
        out["ablated"] = crossing(model.next_token_probs[0].float())
    return out


def prompt_shared(ids: list[int], reads_args: tuple) -> tuple | None:
    """`prompt_reads`' arguments as they read for any prompt of the same pattern block: the
    lens's window counted from the end; None where it keeps streams (a key a prompt)."""
    shown, block, start, stop, k, heads, keep = reads_args
    if keep is not None:
        return None
    return (shown, block, *from_end(len(ids), start, stop), k, heads, None)


def prompt_result(model, ids, found: dict, prompt, heads, start: int, shown, block: int, clean=None) -> PromptResult:
    """The `PromptResult` from `prompt_reads`' answer (``clean``: the clean run's
    next-token probabilities where heads were ablated)."""
    count = len(ids)
    ablation = ablation_delta(clean, found["ablated"], heads) if heads else None
    tokens = tokens_of(model, found["input_ids"])  # the ids the check made: the engine was given them
    lens = lens_grid(model, tokens, found["lens"], found["model_top"], start)
    num_layers = model.num_layers
    attention = attention_pattern(tokens, shown, num_layers, found["pattern"], block) if shown is not None else None
    shapes = {value.id: value.shape for value in described(model, count)}
    nbytes = lens.top_ids.nbytes + lens.top_probs.nbytes + (attention.nbytes if attention is not None else 0)
    layers = pattern_layers(model)
    return PromptResult(
        prompt, tokens, lens, attention, layers, shapes, heads, int(nbytes + count * 8), ablation, found.get("kept")
    )


#: ``session.each(prompts)``'s question (`run_each`).
PROMPT_QUESTION = Question("prompt", prompt_reads, prompt_result, prompt_shared)


def run_prompt(model, prompt: Any, **options: Any) -> PromptResult:
    """What the explorer paints first, for ``prompt``: one trace.

    ``options`` are `prompt_plan`'s. ``layer``: the layer whose pattern comes with it
    (the first that has one by default; max-pooled to ``side`` cells a side past ``side`` tokens); ``window``: the
    lens's positions (see `lens_window`); ``ablate``: heads ``(layer, head)`` zeroed
    before the reads, and then a second invoke of the same trace runs the prompt clean,
    for the result's ``ablation`` (an `AblationDelta`). ``keep``: a key under which the
    worker keeps every layer's stream of the prompt (`kept`), so that another lens window
    of it needs no forward.
    """
    ids, reads_args, build_args = prompt_plan(model, prompt, **options)
    heads = reads_args[5]
    reader = model.reader()  # ablated heads are zeroed in place, which the reader can do
    with model.trace(temperature=0.0, max_tokens=1) as tracer:
        out = dict().save()
        with tracer.invoke(ids):  # the prompt (tokenised once, here), with the heads ablated if any
            out["found"] = prompt_reads(reader, *reads_args)
        if heads:
            with tracer.invoke(ids):  # the clean run: one more invoke, not one more request
                out["clean"] = reader.next_token_probs[0].float().cpu()
    return prompt_result(model, ids, out["found"], *build_args, clean=out.get("clean"))
