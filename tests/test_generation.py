"""Generation and the lens modes on a real engine (requests/generation.py), held to
transformers (float32, eager) on the tiny checkpoints: the greedy ids, each step's lens,
a followed token's probability and rank, the entropy; the decode step's reason; one
engine request per generation; bad input refused before any request."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from conftest import open_session
from nnterp_widgets.checkpoints import checkpoint
from nnterp_widgets.requests.generation import GenerationError, GenerationResult, LensModes
from nnterp_widgets.requests.sites import InterventionError
from nnterp_widgets.requests import generation as gen
from reference import hf_model, reference_values
from seed_text import SEED_DECODE

PROMPT = "The Eiffel Tower is in"
STEPS = 6
PATTERN = ("self_attn.attention_scores", "self_attn.attention_probabilities")


@pytest.fixture(scope="module", params=["qwen2", "gpt2"])
def family(request):
    return request.param


@pytest.fixture(scope="module")
def session(family):
    opened = open_session(family)
    yield opened
    opened.close()


def _vllm_requests(session) -> int:
    """Requests vLLM itself was given (its own counter, not the session's)."""
    return session._engine().vllm_entrypoint.request_counter.counter


@pytest.fixture(scope="module")
def target(session):
    """A token the lens ranks neither first nor last: the prompt's last token."""
    return session.tokenizer()(PROMPT)["input_ids"][-1]


@pytest.fixture(scope="module")
def result(session, target) -> GenerationResult:
    return session.generate(PROMPT, max_tokens=STEPS, target=target, ignore_eos=True).result(timeout=120)


def _hf_greedy(path: str, ids: list[int], steps: int) -> list[int]:
    model, _ = hf_model(path)
    ids = list(ids)
    with torch.no_grad():
        for _ in range(steps):
            ids.append(int(model(torch.tensor([ids], device=model.device)).logits[0, -1].argmax()))
    return ids


def _hf_lens(path: str, family: str, ids: list[int]) -> torch.Tensor:
    """transformers' logit lens at every position of ``ids``: ``[layers, tokens, vocab]``.

    The model is causal, so position ``p`` of one forward is what a step reading
    position ``p`` sees with the earlier ones cached.
    """
    model, _ = hf_model(path)
    streams = reference_values(path, family, ids)
    head = model.get_output_embeddings()
    norm = model.model.norm if hasattr(model, "model") else model.transformer.ln_f
    with torch.no_grad():
        rows = [
            torch.softmax(head(norm(streams[("layer_output", i)])), dim=-1)[0]
            for i in range(model.config.num_hidden_layers)
        ]
    return torch.stack(rows).cpu()


def _entropy(probs: torch.Tensor) -> torch.Tensor:
    return -torch.where(probs > 0, probs * probs.log(), torch.zeros_like(probs)).sum(-1)


def _assert_ranks(got: np.ndarray, probs: torch.Tensor, target: int) -> None:
    """The target's rank, where float32 noise cannot reorder it (a near-tie may go either way)."""
    mine = probs[..., target : target + 1]
    above = (probs > mine + 1e-6).sum(-1) + 1
    tied = ((probs - mine).abs() <= 1e-6).sum(-1) - 1
    got = torch.tensor(got)
    assert torch.all(got >= above) and torch.all(got <= above + tied), (got, above, tied)


def test_greedy_ids_match_transformers(session, result):
    prompt_ids = session.tokenizer()(PROMPT)["input_ids"]
    assert result.tokens.ids[: result.prompt_length] == tuple(prompt_ids)
    assert len(result.steps) == STEPS
    assert list(result.tokens.ids) == _hf_greedy(str(checkpoint(session_family(session))), prompt_ids, STEPS)
    tokenizer = session.tokenizer()
    assert result.generated.texts == tuple(tokenizer.decode([i]) for i in result.generated.ids)


def session_family(session) -> str:
    return session._engine().family.model_type


def test_each_step_lens_matches_transformers(session, result):
    family = session_family(session)
    path = str(checkpoint(family))
    lens = _hf_lens(path, family, list(result.tokens.ids[:-1]))
    for step in result.steps:
        assert step.position == result.prompt_length - 1 + step.index
        want = lens[:, step.position].topk(step.lens_ids.shape[-1], dim=-1)
        np.testing.assert_array_equal(step.lens_ids, want.indices.numpy())
        np.testing.assert_allclose(step.lens_probs, want.values.numpy(), atol=1e-5)
        # The last layer's lens is the model's own prediction, which greedy wrote.
        np.testing.assert_array_equal(step.lens_ids[-1], step.model_ids)
        np.testing.assert_allclose(step.lens_probs[-1], step.model_probs, atol=1e-5)
        assert step.token == step.model_ids[0]
    panel = result.lens
    assert panel.top_ids.shape[:2] == (lens.shape[0], STEPS)
    np.testing.assert_array_equal(panel.top_ids[:, 2], result.steps[2].lens_ids)


def test_lens_modes_match_transformers(session, result, target):
    family = session_family(session)
    lens = _hf_lens(str(checkpoint(family)), family, list(result.tokens.ids[:-1]))
    at_steps = lens[:, [step.position for step in result.steps]]
    modes = result.modes
    assert modes.target.id == target and modes.columns == result.generated
    np.testing.assert_allclose(modes.probability, at_steps[..., target].numpy(), atol=1e-5)
    _assert_ranks(modes.rank, at_steps, target)
    np.testing.assert_allclose(modes.entropy, _entropy(at_steps).numpy(), atol=1e-4)
    np.testing.assert_array_equal(modes.top_ids, at_steps.argmax(-1).numpy())
    np.testing.assert_array_equal(modes.values("top-1"), result.lens.top1_probs())


def test_follow_matches_transformers(session, target):
    family = session_family(session)
    tokenizer = session.tokenizer()
    ids = tokenizer(PROMPT)["input_ids"]
    text = tokenizer.decode([target])
    assert tokenizer.encode(text, add_special_tokens=False) == [target]
    before = session.engine_requests
    modes = session.follow(PROMPT, text).result(timeout=120)  # by its text
    assert session.engine_requests - before == 1
    assert isinstance(modes, LensModes) and modes.target.id == target
    assert modes.positions == tuple(range(len(ids))) and modes.columns.ids == tuple(ids)
    lens = _hf_lens(str(checkpoint(family)), family, ids)
    np.testing.assert_allclose(modes.probability, lens[..., target].numpy(), atol=1e-5)
    _assert_ranks(modes.rank, lens, target)
    np.testing.assert_allclose(modes.entropy, _entropy(lens).numpy(), atol=1e-4)
    np.testing.assert_allclose(modes.top_probs, lens.max(-1).values.numpy(), atol=1e-5)
    by_id = session.follow(PROMPT, target).result(timeout=120)
    np.testing.assert_array_equal(by_id.rank, modes.rank)
    plain = session.follow(PROMPT).result(timeout=120)
    assert plain.target is None and plain.modes() == ("top-1", "entropy")
    with pytest.raises(ValueError, match="follow a target first"):
        plain.values("rank")


def test_decode_steps_carry_the_seeds_reason(session, result):
    prefill, *decode = result.steps
    assert prefill.is_prefill and all(prefill.availability[name] is None for name in PATTERN)
    assert prefill.availability == session.support()
    for step in decode:
        for name in PATTERN:
            assert step.availability[name] == SEED_DECODE
        others = {k: v for k, v in step.availability.items() if k not in PATTERN}
        assert others == {k: v for k, v in session.support().items() if k not in PATTERN}
    engine = session._engine()
    attn = engine.layers[0].self_attn
    assert attn.unavailable_reason("attention_probabilities", step=1) == SEED_DECODE
    assert attn.unavailable_reason("attention_probabilities", step=0) is None
    assert attn.unavailable_reason("attention_queries", step=1) is None
    with pytest.raises(ValueError, match="generation step"):
        engine.support(step=-1)


def test_the_tree_on_a_step_greys_what_the_step_cannot_serve(session, result):
    """The module tree (and the description it is built from) on a step: the decode step's
    reasons are the step's availability, the prefill's the prompt's; no request."""
    before = session.engine_requests
    count = len(result.tokens)

    def reasons(step):
        found = {}
        for value in session.describe(count, step=step):
            if value.layer is not None:
                found.setdefault(".".join(filter(None, (value.part, value.name))), set()).add(value.reason)
        return found

    for step in (0, 2):
        got = reasons(step)
        assert set(got) <= set(result.steps[step].availability) and "layer_output" in got
        assert got == {name: {result.steps[step].availability[name]} for name in got}
    assert reasons(2)["self_attn.attention_probabilities"] == {SEED_DECODE}
    assert reasons(None) == reasons(0)  # outside any step: as the prefill (the seed's support())
    tree = session.tree(count, step=1)

    def values(node):
        yield from node["values"]
        for child in node["children"]:
            yield from values(child)

    pattern = [v for v in values(tree[0]) if v["name"] in ("attention_scores", "attention_probabilities")]
    assert pattern and all(not v["available"] and v["reason"] == SEED_DECODE and v["shape"] is None for v in pattern)
    prefill = [v for v in values(session.tree(count, step=0)[0]) if v["id"] in {p["id"] for p in pattern}]
    assert len(prefill) == len(pattern) and all(v["available"] and v["reason"] is None for v in prefill)
    with pytest.raises(ValueError, match="generation step"):
        session.tree(count, step=-1)
    assert session.engine_requests == before


def test_one_session_request_per_generation_in_chunks(session):
    before, vllm_before = session.engine_requests, _vllm_requests(session)
    again = session.generate(PROMPT, max_tokens=3, ignore_eos=True).result(timeout=120)
    assert session.engine_requests - before == 1
    # vLLM's requests are the chunks: the first FIRST_CHUNK steps, then the rest at the pace seen.
    assert _vllm_requests(session) - vllm_before == 2 == 1 + (3 > gen.FIRST_CHUNK)
    assert len(again.steps) == 3 and again.modes.target is None


def test_a_generation_shows_its_steps_as_they_come_and_stops_when_asked(session, result):
    """The first chunk's steps reach a watcher as a partial generation (the greedy tokens
    a whole generation writes); a cancel asked there stops it at that chunk, and the next
    request is served."""
    gate = threading.Event()
    session.request(lambda engine: gate.wait(60))  # holds the engine until the watcher is on
    job = session.generate(PROMPT, max_tokens=40, ignore_eos=True)
    seen = []

    def watch(running) -> None:
        seen.append((running.progress, running.partial()))
        running.cancel()  # on the engine's thread, between chunks: honoured at once

    job.on_progress(watch)
    gate.set()
    following = session.generate(PROMPT, max_tokens=2, ignore_eos=True).result(timeout=120)
    assert job.cancelled() and len(following.steps) == 2
    ((done, total), partial), *_ = seen
    assert total == 40 and done == gen.FIRST_CHUNK == len(partial.steps) == job.progress[0]
    written = partial.tokens.ids[partial.prompt_length :]
    assert written == result.tokens.ids[result.prompt_length :][:done]  # the greedy tokens so far


def test_sampling_settings_pass_through(session, result):
    seeded = dict(temperature=1.0, seed=3, ignore_eos=True)
    first = session.generate(PROMPT, max_tokens=STEPS, **seeded).result(timeout=120)
    second = session.generate(PROMPT, max_tokens=STEPS, **seeded).result(timeout=120)
    assert first.tokens == second.tokens
    assert first.sampling["temperature"] == 1.0 and result.sampling["temperature"] == 0.0
    top1 = session.generate(PROMPT, max_tokens=STEPS, temperature=1.0, top_k=1, ignore_eos=True).result(timeout=120)
    assert top1.tokens == result.tokens  # top_k=1 samples the greedy token


@pytest.mark.parametrize(
    "max_tokens, message",
    [
        (0, "at least 1"),
        (-3, "at least 1"),
        (2.5, "a whole number"),
        (True, "a whole number"),
        ("3", "a whole number"),
        (70, "past this engine's max_model_len=64"),
    ],
)
def test_bad_max_tokens_then_a_good_request(session, result, max_tokens, message):
    vllm_before = _vllm_requests(session)
    with pytest.raises(GenerationError, match=message):
        session.generate(PROMPT, max_tokens=max_tokens).result(timeout=60)
    assert _vllm_requests(session) == vllm_before  # refused before any request
    good = session.generate(PROMPT, max_tokens=2, ignore_eos=True).result(timeout=120)
    assert good.tokens.ids == result.tokens.ids[: result.prompt_length + 2]


def test_max_model_len_is_the_limit(session):
    prompt_length = len(session.tokenizer()(PROMPT)["input_ids"])
    room = 64 - prompt_length
    with pytest.raises(GenerationError) as error:
        session.generate(PROMPT, max_tokens=room + 1).result(timeout=60)
    assert str(error.value) == gen.PAST_MAX_MODEL_LEN.format(
        prompt=prompt_length, max_tokens=room + 1, total=65, limit=64, room=room
    )
    full = session.generate(PROMPT, max_tokens=room, ignore_eos=True).result(timeout=120)
    assert len(full.tokens) == 64


@pytest.mark.parametrize(
    "bad, message",
    [
        ("The Eiffel Tower", "tokens .*not one"),
        ("", "empty"),
        (10**7, "outside the vocabulary"),
        (-1, "outside the vocabulary"),
        (1.5, "a token id"),
    ],
)
def test_bad_target_then_a_good_request(session, result, bad, message):
    vllm_before = _vllm_requests(session)
    with pytest.raises(GenerationError, match=message):
        session.generate(PROMPT, max_tokens=2, target=bad).result(timeout=60)
    with pytest.raises(GenerationError, match=message):
        session.follow(PROMPT, bad).result(timeout=60)
    assert _vllm_requests(session) == vllm_before
    good = session.generate(PROMPT, max_tokens=2, ignore_eos=True).result(timeout=120)
    assert good.tokens.ids == result.tokens.ids[: result.prompt_length + 2]


@pytest.mark.parametrize("bad", ["The Eiffel Tower", "", 10**7, 1.5])
def test_a_target_and_an_answer_are_checked_by_one_rule(session, bad):
    """Generation's target and an intervention's answer say the same thing of the same
    bad token, each with its role, each as its feature's error."""
    with pytest.raises(GenerationError) as target:
        session.follow(PROMPT, bad).result(timeout=60)
    with pytest.raises(InterventionError) as answer:
        session.attribute(PROMPT, bad).result(timeout=60)
    said = str(target.value)
    assert said.startswith("the target") and str(answer.value) == said.replace("the target", "the answer", 1)


def test_one_sequence_and_one_length(session):
    with pytest.raises(GenerationError, match="n=2"):
        session.generate(PROMPT, max_tokens=2, n=2, temperature=1.0).result(timeout=60)
    with pytest.raises(GenerationError, match="not also as max_new_tokens"):
        session.generate(PROMPT, max_tokens=2, max_new_tokens=3).result(timeout=60)
