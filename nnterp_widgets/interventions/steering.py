"""Steering: add a vector to the stream and watch what the model writes, one request.

    vector = session.steering_vector("I love this. It is wonderful.", "I hate this. It is awful.", layer=10).result()
    result = session.steer("The movie was", vector, layer=10, coefficient=4.0, max_tokens=8).result()
    result.steered.text, result.plain.text    # the two continuations, side by side
    result.divergence                         # the first step where they differ (None: never)

The vector times the coefficient is added to ``layers[layer].layer_output`` at every
position of the prefill and at every decoded step, in one invoke; the same prompt runs
unsteered in a second invoke of the same trace, so both come back from one request.
Both are greedy unless sampling settings say otherwise.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..requests.generation import (
    GENERATE_TOKENS,
    GenerationError,
    GenerationResult,
    check_max_tokens,
    generation_result,
    run_chunks,
    run_groups,
    sampling_settings,
)
from ..requests.common import LENS_K, check_prompt
from ..requests.batches import Results
from ..requests.progress import NO_PROGRESS, Progress
from ..requests.sites import LAYER_OUT_OF_RANGE, check_positions
from ..requests.tables import stacked

VECTOR_WIDTH = "the steering vector has {got} numbers; this model's stream has {want} (hidden_size)"
VECTOR_NOT_FINITE = "the steering vector holds a value that is not finite (NaN or infinity)"
VECTOR_SHAPE = "the steering vector is one row of numbers, shape [{want}]; got shape {shape}"
COEFFICIENT = "the coefficient must be a finite number; got {value!r}"
OVERFLOW = "the vector times {coefficient} overflows float32 (the vector's norm is {norm:.3g}): lower the coefficient"
DID_NOT_FINISH = (
    "the steered run did not finish (the vector times {coefficient} at layers[{layer}] broke the engine's "
    "sampling): lower the coefficient"
)
NOT_FINITE_LOGITS = (
    "with the vector times {coefficient} added at layers[{layer}], the logits are not finite (or all "
    "equal) at step {step}: lower the coefficient (the vector's norm is {norm:.3g})"
)


class SteeringError(GenerationError):
    """A steering request the engine cannot take: said before any request, or after one
    whose logits broke (not finite, or all equal; the engine keeps serving)."""


@dataclass(frozen=True)
class SteerResult:
    """Two generations of one prompt from one request: ``steered`` (the vector times
    ``coefficient`` added at ``layers[layer]``) and ``plain`` (nothing added).

    ``positions``: the prompt positions steered (``None``: every one); ``decode``:
    whether every written token was steered too. ``norm``: the vector's L2 norm.
    """

    layer: int
    coefficient: float
    norm: float
    steered: GenerationResult
    plain: GenerationResult
    positions: tuple[int, ...] | None = None
    decode: bool = True

    @property
    def prompt(self) -> str:
        """The prompt both continue."""
        return self.steered.prompt

    @property
    def divergence(self) -> int | None:
        """The first step whose written token differs between the two, or None."""
        for index, (a, b) in enumerate(zip(self.steered.generated.ids, self.plain.generated.ids, strict=False)):
            if a != b:
                return index
        return None

    def to_pandas(self):
        """Both generations' lens tables (`GenerationResult.to_pandas`), ``run``
        ``"steered"`` or ``"plain"``."""
        return stacked({"steered": self.steered.to_pandas(), "plain": self.plain.to_pandas()}, "run")


def check_vector(model, vector: Any) -> torch.Tensor:
    """``vector`` (numpy, torch or a list) as a float32 CPU tensor ``[hidden_size]``."""
    if isinstance(vector, torch.Tensor):
        vector = vector.detach().cpu()
    try:
        array = torch.from_numpy(np.array(vector, dtype=np.float32))  # a copy: the caller's may be read-only
    except (TypeError, ValueError) as error:
        raise SteeringError(VECTOR_SHAPE.format(want=model.hidden_size, shape="not numbers")) from error
    if array.dim() != 1:
        squeezed = array.squeeze()
        if squeezed.dim() != 1:
            raise SteeringError(VECTOR_SHAPE.format(want=model.hidden_size, shape=tuple(array.shape)))
        array = squeezed
    if array.shape[0] != model.hidden_size:
        raise SteeringError(VECTOR_WIDTH.format(got=array.shape[0], want=model.hidden_size))
    if not torch.isfinite(array).all():
        raise SteeringError(VECTOR_NOT_FINITE)
    return array


def check_layer(model, layer: Any) -> int:
    if isinstance(layer, bool) or not isinstance(layer, numbers.Integral) or not 0 <= int(layer) < model.num_layers:
        raise SteeringError(LAYER_OUT_OF_RANGE.format(layer=layer, last=model.num_layers - 1))
    return int(layer)


def check_coefficient(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise SteeringError(COEFFICIENT.format(value=value))
    return float(value)


def steer(
    model,
    prompt: str,
    vector: Any,
    layer: int,
    coefficient: float = 1.0,
    max_tokens: int = GENERATE_TOKENS,
    *,
    positions=None,
    decode: bool | None = None,
    k: int = LENS_K,
    progress: Progress = NO_PROGRESS,
    **sampling: Any,
) -> SteerResult:
    """``prompt`` generated with ``coefficient * vector`` added to
    ``layers[layer].layer_output`` (at every position and step by default), and without it.

    Args:
        model: the `StandardizedVLLM`.
        prompt: the text to continue.
        vector: ``[hidden_size]`` numbers (numpy, torch or a list).
        layer: the block whose output stream is steered.
        coefficient: the vector's multiplier.
        max_tokens: tokens each continuation writes.
        positions: the prompt positions steered (``None``: all; negative ones count
            from the end).
        decode: whether every written token is steered too; by default, where
            ``positions`` is ``None``.
        progress: hears the steps written after each chunk (`generation.run_chunks`);
            its partial answer is both continuations so far.
        sampling: vLLM's sampling settings (greedy by default).

    Returns:
        A `SteerResult`; `SteeringError` before any request for bad input, or when the
        steered logits are not finite or all equal.
    """
    prompt_ids = check_prompt(model, prompt)
    max_tokens = check_max_tokens(model, prompt_ids, max_tokens)
    added, coefficient, layer, norm = check_steering(model, vector, coefficient, layer)
    chosen = None if positions is None else check_positions(positions, len(prompt_ids))
    decode = positions is None if decode is None else bool(decode)
    settings = sampling_settings(sampling)
    facts = (layer, coefficient, norm, chosen, decode, settings)

    def partial(found: list) -> SteerResult:
        return steer_result(model, prompt, prompt_ids, found, facts, check=False)

    edit = (layer, added, None if chosen is None else list(chosen), decode, len(prompt_ids))
    found = run_chunks(
        model, [(prompt_ids, edit), (prompt_ids, None)], max_tokens, settings, k, None, progress, partial
    )
    return steer_result(model, prompt, prompt_ids, found, facts)


def check_steering(model, vector: Any, coefficient: Any, layer: Any) -> tuple[torch.Tensor, float, int, float]:
    """``(vector * coefficient, coefficient, layer, the vector's norm)``, each checked."""
    direction = check_vector(model, vector)
    coefficient = check_coefficient(coefficient)
    added = direction * coefficient
    if not torch.isfinite(added).all():
        raise SteeringError(OVERFLOW.format(coefficient=coefficient, norm=float(direction.norm())))
    return added, coefficient, check_layer(model, layer), float(direction.norm())


def steer_result(model, prompt, ids, found: list, facts: tuple, check: bool = True) -> SteerResult:
    """The `SteerResult` of the two runs' steps ``found = [steered, plain]``; with
    ``check``, a `SteeringError` where the steered run broke (its logits not finite or
    all equal) or did not finish."""
    layer, coefficient, norm, chosen, decode, settings = facts
    steered, plain = found
    if check:
        if not steered or not plain:
            raise SteeringError(DID_NOT_FINISH.format(coefficient=coefficient, layer=layer))
        broken = next((i for i, step in enumerate(steered) if not step["logits_usable"]), None)
        if broken is not None:
            raise SteeringError(NOT_FINITE_LOGITS.format(coefficient=coefficient, layer=layer, step=broken, norm=norm))
    return SteerResult(
        layer=layer,
        coefficient=coefficient,
        norm=norm,
        steered=generation_result(model, prompt, ids, steered, None, settings),
        plain=generation_result(model, prompt, ids, plain, None, settings),
        positions=chosen,
        decode=decode,
    )


#: Prompts a batch steers together (each two invokes of every chunk's trace: steered, plain).
STEER_GROUP = 16


def steer_each(
    model,
    prompts: list,
    vector: Any,
    layer: int,
    coefficient: float = 1.0,
    max_tokens: int = GENERATE_TOKENS,
    *,
    positions=None,
    decode: bool | None = None,
    k: int = LENS_K,
    progress: Progress = NO_PROGRESS,
    group: int = STEER_GROUP,
    **sampling: Any,
) -> Results:
    """`steer` of every prompt, ``group`` prompts (steered and plain) decoding together:
    `Results` of `SteerResult`, in order. The vector, layer and coefficient are checked
    once (bad ones refuse the whole batch); a prompt the engine cannot take gets its error
    in its slot. ``progress`` counts prompts."""
    added, coefficient, layer, norm = check_steering(model, vector, coefficient, layer)
    settings = sampling_settings(sampling)
    steered_decode = positions is None if decode is None else bool(decode)

    def plan(ids):
        return None if positions is None else check_positions(positions, len(ids))

    def sequences(ids, chosen):
        edit = (layer, added, None if chosen is None else list(chosen), steered_decode, len(ids))
        return [(ids, edit), (ids, None)]

    def build(prompt, ids, chosen, found):
        return steer_result(model, prompt, ids, found, (layer, coefficient, norm, chosen, steered_decode, settings))

    return run_groups(model, prompts, "steer", plan, sequences, build, max_tokens, settings, progress, k=k, group=group)


#: Where a steering vector reads each prompt's stream: its mean over the tokens, or its last token.
VECTOR_AT = ("mean", "last")
UNKNOWN_AT = "at is where each prompt's stream is read: {choices}; got {at!r}"


def side_prompts(model, side: Any) -> list[list[int]]:
    """One side of a steering vector as token id lists: a prompt (text or ids), or a
    non-empty list of prompts."""
    try:
        return [check_prompt(model, side)]
    except TypeError:
        if not isinstance(side, (list, tuple)) or not side:
            raise
        return [check_prompt(model, prompt) for prompt in side]


def steering_vector(model, positive: Any, negative: Any, layer: int, at: str = "mean") -> np.ndarray:
    """One request: the mean of ``layers[layer].layer_output`` over ``positive``'s prompts
    minus the same over ``negative``'s, a float32 numpy vector ``[hidden_size]``.

    Args:
        model: the `StandardizedVLLM`.
        positive, negative: a prompt (text or token ids) or a list of prompts each.
        layer: whose output stream is read.
        at: ``"mean"``: each prompt's stream averaged over its tokens; ``"last"``: its last
            token's stream.

    Returns:
        The vector (read-only).
    """
    if at not in VECTOR_AT:
        raise SteeringError(UNKNOWN_AT.format(choices=", ".join(VECTOR_AT), at=at))
    sides = {"positive": side_prompts(model, positive), "negative": side_prompts(model, negative)}
    layer = check_layer(model, layer)
    last = at == "last"
    reader = model.reader()  # an invoke a prompt: each names a reference, not the tree
    with model.trace(temperature=0.0, max_tokens=1) as tracer:
        out = dict().save()
        for name, prompts in sides.items():
            for index, ids in enumerate(prompts):
                with tracer.invoke(ids):
                    stream = reader.layers[layer].layer_output[0].float()
                    out[(name, index)] = (stream[-1] if last else stream.mean(0)).cpu()
    means = {
        name: torch.stack([out[(name, index)] for index in range(len(prompts))]).mean(0)
        for name, prompts in sides.items()
    }
    vector = (means["positive"] - means["negative"]).numpy().astype(np.float32)
    vector.setflags(write=False)
    return vector
