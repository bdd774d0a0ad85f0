"""Steer, branch and occlude on the real engine, held to transformers (float32, eager).

The module's session is the tiny qwen2 checkpoint (conftest's ``session``); the
reference is the same checkpoint in transformers with the same edit made by a plain
forward hook (steering) or the same token ids fed (branching, occlusion).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

import devices
from nnterp_widgets.checkpoints import checkpoint
from nnterp_widgets.requests.generation import GenerationError
from nnterp_widgets.requests.sites import InterventionError
from nnterp_widgets.interventions.steering import SteeringError
from reference import _get, hf_model, names_of

PROMPT = "The Eiffel Tower is in"
FAMILY = "qwen2"
LAYER = 1
TOKENS = 6


def _hf():
    return hf_model(str(checkpoint(FAMILY)))


def hf_greedy(ids: list[int], max_tokens: int, edit=None, positions=None, decode=True) -> list[int]:
    """transformers' greedy continuation of ``ids``; ``edit = (layer, added)`` adds
    ``added`` to that decoder layer's output stream in a forward hook, at ``positions`` of
    the prompt (``None``: all) and, with ``decode``, at every new token."""
    model, _ = _hf()
    handles = []
    if edit is not None:
        layer, added = edit
        block = _get(model, names_of(FAMILY).layers)[layer]

        def hook(module, args, output):
            stream = (output[0] if isinstance(output, tuple) else output).clone()
            if stream.shape[1] == len(ids):  # the prefill (the cache feeds one token a step after)
                stream[:, slice(None) if positions is None else positions] += added.to(stream)
            elif decode:
                stream += added.to(stream)
            return (stream, *output[1:]) if isinstance(output, tuple) else stream

        handles.append(block.register_forward_hook(hook))
    try:
        with torch.no_grad():
            out = model.generate(
                torch.tensor([ids], device=devices.DEVICE),
                max_new_tokens=max_tokens,
                do_sample=False,
                pad_token_id=model.config.eos_token_id,
            )
    finally:
        for handle in handles:
            handle.remove()
    return out[0, len(ids) :].tolist()


def hf_answer(ids: list[int], answer: int) -> tuple[float, float]:
    model, _ = _hf()
    with torch.no_grad():
        logits = model(torch.tensor([ids], device=devices.DEVICE)).logits[0, -1].float()
    return float(logits[answer]), float(logits.softmax(-1)[answer])


@pytest.fixture(scope="module")
def vector(session):
    return session.steering_vector("Paris is a city in France.", "The river runs to the sea.", LAYER).result(60)


# -- steering ----------------------------------------------------------------------------


def test_steering_vector_is_the_difference_of_mean_streams(session, vector):
    from reference import reference_values

    path = str(checkpoint(FAMILY))
    positive = reference_values(path, FAMILY, "Paris is a city in France.")[("layer_output", LAYER)][0].mean(0)
    negative = reference_values(path, FAMILY, "The river runs to the sea.")[("layer_output", LAYER)][0].mean(0)
    assert vector.dtype == np.float32 and vector.shape == positive.shape
    np.testing.assert_allclose(vector, (positive - negative).cpu().numpy(), atol=1e-4, rtol=1e-4)


def test_steered_tokens_are_transformers_greedy_with_the_same_addition(session, vector):
    result = session.steer(PROMPT, vector, LAYER, coefficient=4.0, max_tokens=TOKENS).result(120)
    ids = list(result.plain.prompt_tokens.ids)
    added = torch.as_tensor(vector) * 4.0
    assert list(result.steered.generated.ids) == hf_greedy(ids, TOKENS, (LAYER, added))
    assert list(result.plain.generated.ids) == hf_greedy(ids, TOKENS)
    # The vector changes what the model writes (and the plain run is the unsteered one).
    assert result.divergence is not None
    assert result.steered.generated.ids != result.plain.generated.ids
    assert result.norm == pytest.approx(float(np.linalg.norm(vector)), rel=1e-5)


@pytest.mark.parametrize("positions, decode", [([1, -1], False), ([0], True), (None, False)])
def test_steering_at_some_positions_is_transformers_greedy_with_the_same_addition(session, vector, positions, decode):
    # Steered at some prompt positions, the written tokens steered or not: the engine's
    # chunks re-read the sequence, and each position still gets the vector exactly once.
    result = session.steer(
        PROMPT, vector, LAYER, coefficient=8.0, max_tokens=TOKENS, positions=positions, decode=decode
    ).result(120)
    ids = list(result.plain.prompt_tokens.ids)
    chosen = None if positions is None else sorted(p % len(ids) for p in positions)
    added = torch.as_tensor(vector) * 8.0
    assert result.positions == (None if chosen is None else tuple(chosen)) and result.decode is decode
    assert list(result.steered.generated.ids) == hf_greedy(ids, TOKENS, (LAYER, added), chosen, decode)
    assert result.divergence is not None  # the vector at those places changes what is written
    frame = result.to_pandas()
    assert set(frame["run"]) == {"steered", "plain"} and len(frame) == 2 * len(result.plain.to_pandas())


def test_steering_positions_out_of_range_are_refused(session, vector):
    with pytest.raises(InterventionError, match=r"positions are token positions of the prompt.*0\.\.4"):
        session.steer(PROMPT, vector, LAYER, positions=[5]).result(60)
    assert session.steer(PROMPT, vector, LAYER, positions=[-1], max_tokens=1).result(60).steered is not None


def test_zero_coefficient_changes_nothing(session, vector):
    result = session.steer(PROMPT, vector, LAYER, coefficient=0.0, max_tokens=3).result(120)
    assert result.steered.generated.ids == result.plain.generated.ids and result.divergence is None


@pytest.mark.parametrize(
    "vector_of, layer, coefficient, message",
    [
        (lambda v: v[:-1], LAYER, 1.0, "hidden_size"),
        (lambda v: v, 7, 1.0, "layer 7 is out of range"),
        (lambda v: v, LAYER, float("nan"), "coefficient must be a finite number"),
        (lambda v: np.full_like(v, np.inf), LAYER, 1.0, "not finite"),
    ],
)
def test_bad_steering_input_is_refused_and_the_next_request_succeeds(
    session, vector, vector_of, layer, coefficient, message
):
    with pytest.raises(SteeringError, match=message):
        session.steer(PROMPT, vector_of(vector), layer, coefficient).result(60)
    assert session.steer(PROMPT, vector, LAYER, 1.0, max_tokens=1).result(60).steered is not None


@pytest.mark.parametrize("coefficient", [1e38, 1e36])
def test_a_coefficient_that_breaks_the_logits_is_said_and_the_next_request_succeeds(session, vector, coefficient):
    # 1e38 overflows float32 before any request; 1e36 reaches the engine, whose stream
    # then overflows in the final norm (logits not finite on the CPU; all equal on the
    # H200, whose fused norm turns a stream it cannot square into zeros).
    with pytest.raises(SteeringError, match="lower the coefficient"):
        session.steer(PROMPT, vector, LAYER, coefficient=coefficient, max_tokens=2).result(120)
    assert session.steer(PROMPT, vector, LAYER, coefficient=1.0, max_tokens=2).result(120).steered is not None


# -- branching ---------------------------------------------------------------------------


def test_a_branch_forces_the_token_and_continues_as_transformers_does(session):
    generation = session.generate(PROMPT, max_tokens=TOKENS).result(120)
    step = 2
    forced = int(generation.steps[step].model_ids[1])  # the step's second choice
    result = session.branch(generation, step, forced).result(120)
    assert result.forced == forced and result.step == step
    prefix = list(generation.tokens.ids[: generation.prompt_length + step]) + [forced]
    assert list(result.branched.generated.ids) == hf_greedy(prefix, TOKENS - step - 1)
    assert result.continuation[0] == result.forced_text
    assert len(result.continuation) == len(result.original_continuation)
    assert result.original_continuation[0] != result.forced_text


def test_a_branch_on_the_written_token_or_out_of_range_is_refused(session):
    generation = session.generate(PROMPT, max_tokens=3).result(120)
    with pytest.raises(GenerationError, match="already wrote"):
        session.branch(generation, 1, generation.steps[1].token).result(60)
    with pytest.raises(GenerationError, match="out of range"):
        session.branch(generation, 5, 1).result(60)


# -- occlusion ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["replace", "drop"])
def test_occlusion_is_transformers_on_each_occluded_prompt(session, mode):
    from nnterp_widgets.interventions.occlusion import variants

    result = session.occlude(PROMPT, " Paris", mode=mode).result(120)
    ids = list(result.tokens.ids)
    assert result.logits.shape == (len(ids),) and result.exact.all() and result.requests >= 1
    clean = hf_answer(ids, result.answer)
    assert result.clean_logit == pytest.approx(clean[0], abs=1e-4)
    for position, occluded in enumerate(variants(ids, mode, result.neutral)):
        logit, prob = hf_answer(occluded, result.answer)
        assert result.logits[position] == pytest.approx(logit, abs=1e-4), position
        assert result.probs[position] == pytest.approx(prob, abs=1e-5), position
    if mode == "replace":
        assert result.neutral_text == " "
    np.testing.assert_allclose(result.delta_logit, result.logits - result.clean_logit)


LONG = " ".join(["The Eiffel Tower is in Paris, and the Colosseum is in Rome."] * 3) + " The Eiffel Tower is in"


@pytest.fixture
def coarse_from_16(monkeypatch):
    """This module's tiny engine takes 63 tokens: blocks first from 16 tokens (64 in use)."""
    from nnterp_widgets.interventions import occlusion

    monkeypatch.setattr(occlusion, "COARSE_FROM", 16)
    return 16


@pytest.mark.parametrize("mode", ["replace", "drop"])
def test_a_long_prompts_occlusion_answers_blocks_first_and_is_transformers_on_each_prompt_it_ran(
    session, mode, coarse_from_16
):
    from nnterp_widgets.interventions.occlusion import REFINE_SHARE, occluded

    COARSE_FROM = coarse_from_16
    job = session.occlude(LONG, " Paris", mode=mode)
    partials = []
    job.on_progress(lambda j: partials.append(j.partial()))
    result = job.result(300)
    ids = list(result.tokens.ids)
    assert len(ids) > COARSE_FROM and result.blocks
    # The coarse row came first: a partial answer with every position valued and none exact.
    coarse = next(p for p in partials if p is not None and not np.isnan(p.logits).any())
    assert not coarse.exact.any()
    # The blocks tile the prompt; the strongest were refined, about REFINE_SHARE of the tokens.
    assert [b[0] for b in result.blocks][1:] == [b[1] for b in result.blocks][:-1]
    assert result.blocks[0][0] == 0 and result.blocks[-1][1] == len(ids)
    assert 0 < result.exact.sum() <= REFINE_SHARE * len(ids) + 8  # whole blocks: up to one more
    strength = np.abs(result.block_logits - result.clean_logit)
    refined = [i for i, (start, stop) in enumerate(result.blocks) if result.exact[start:stop].all()]
    assert strength[refined].min() >= np.delete(strength, refined).max()
    # Each prompt it ran is transformers: the clean one, each block, each refined token.
    assert result.clean_logit == pytest.approx(hf_answer(ids, result.answer)[0], abs=1e-4)
    for (start, stop), logit in zip(result.blocks, result.block_logits, strict=True):
        assert logit == pytest.approx(
            hf_answer(occluded(ids, (start, stop), mode, result.neutral), result.answer)[0], abs=1e-4
        )
    for position in np.flatnonzero(result.exact):
        expected = hf_answer(occluded(ids, (position, position + 1), mode, result.neutral), result.answer)
        assert result.logits[position] == pytest.approx(expected[0], abs=1e-4), position
    for start, stop in result.blocks:  # a token not refined shows its block's value
        inexact = ~result.exact[start:stop]
        assert (result.logits[start:stop][inexact] == result.block_logits[result.blocks.index((start, stop))]).all()
    # The full resolution is still there.
    whole = session.occlude(LONG, " Paris", mode=mode, resolution="token").result(300)
    assert whole.exact.all() and not whole.blocks
    np.testing.assert_allclose(whole.logits[result.exact], result.logits[result.exact], atol=1e-4)


def test_occlusion_can_be_stopped_and_the_next_request_is_answered_at_once(session, coarse_from_16):
    gate = threading.Event()
    session.request(lambda engine: gate.wait(60))  # holds the engine until the watcher is on
    job = session.occlude(LONG, " Paris")

    def stop_at_the_coarse_row(running) -> None:  # on the engine's thread, between chunks
        if not np.isnan(running.partial().logits).any():
            running.cancel()

    job.on_progress(stop_at_the_coarse_row)
    gate.set()
    following = session.attribute(PROMPT, " Paris").result(120)
    assert job.cancelled() and following is not None
    done, total = job.progress
    assert 0 < done < total
    partial = job.partial()
    assert partial.blocks and not np.isnan(partial.logits).any() and not partial.exact.any()


def test_bad_occlusion_input_is_refused(session):
    with pytest.raises(InterventionError, match="unknown occlusion mode"):
        session.occlude(PROMPT, " Paris", mode="mask").result(60)
    with pytest.raises(InterventionError, match="unknown occlusion resolution"):
        session.occlude(PROMPT, " Paris", resolution="words").result(60)
    with pytest.raises(InterventionError, match="exactly one token"):
        session.occlude(PROMPT, " Paris is", mode="replace").result(60)


def test_a_steering_vector_from_lists_of_prompts_read_at_the_mean_or_the_last_token(session):
    from nnterp_widgets.interventions.steering import SteeringError
    from reference import reference_values

    positive = ["I love this film", "What a wonderful day"]
    negative = ["I hate this film"]
    path = str(checkpoint(FAMILY))
    streams = {
        text: reference_values(path, FAMILY, text)[("layer_output", LAYER)][0].cpu().double()
        for text in positive + negative
    }
    for at in ("mean", "last"):
        read = {text: (stream.mean(0) if at == "mean" else stream[-1]) for text, stream in streams.items()}
        want = torch.stack([read[t] for t in positive]).mean(0) - torch.stack([read[t] for t in negative]).mean(0)
        vector = session.steering_vector(positive, negative, LAYER, at=at).result(120)
        np.testing.assert_allclose(vector, want.numpy(), atol=1e-4)
    single = session.steering_vector(positive[0], negative[0], LAYER).result(120)
    one = streams[positive[0]].mean(0) - streams[negative[0]].mean(0)
    np.testing.assert_allclose(single, one.numpy(), atol=1e-4)
    with pytest.raises(SteeringError, match="at is where"):
        session.steering_vector(positive, negative, LAYER, at="first").result(60)
    with pytest.raises(TypeError, match="a prompt is text"):
        session.steering_vector([1.5], negative, LAYER).result(60)
