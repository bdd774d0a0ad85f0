"""The research calls (issue 37) held to transformers on two tiny families: qwen2 (grouped
query attention, a fused residual pair) and gpt2 (one kv head per head, a plain stream,
fused qkv). Every layer's exact pattern, induction scores, a whole value, attribution at a
position, steering at some positions (patching's options: tests/test_interventions.py).
The same calls on the trained model: tests/test_trained_model.py."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

import devices
from conftest import open_session
from nnterp_widgets.checkpoints import checkpoint
from nnterp_widgets.requests.common import MAX_RESULT_BYTES, RequestRefused, ResultTooLarge
from reference import _get, hf_model, names_of, reference_attention, reference_attribution, reference_values

LONGER = "The Eiffel Tower is in Paris and the Colosseum is in Rome"
REPEATED = "The Eiffel Tower is in Paris. The Eiffel Tower is in Paris."


@pytest.fixture(scope="module", params=["qwen2", "gpt2"])
def family(request):
    return request.param


@pytest.fixture(scope="module")
def session(family):
    opened = open_session(family)
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def hf(family):
    return hf_model(str(checkpoint(family)))


def test_patterns_are_every_layers_exact_pattern_in_one_request(session, family, hf):
    expected = reference_attention(str(checkpoint(family)), family, LONGER)
    config = hf[0].config
    before = session.engine_requests
    whole = session.patterns(LONGER).result(timeout=120)
    assert session.engine_requests - before == 1
    count = len(whole.tokens)
    layers, heads = config.num_hidden_layers, config.num_attention_heads
    assert whole.layer_ids == tuple(range(layers)) and whole.values.shape == (layers, heads, count, count)
    assert whole.values.dtype == np.float32
    for layer in whole.layer_ids:
        want = expected[("attention_probabilities", layer)][0].cpu().numpy()
        np.testing.assert_allclose(whole.layer(layer), want, atol=1e-5)
    one = session.patterns(LONGER, [1]).result(timeout=120)
    assert one.layer_ids == (1,)
    np.testing.assert_array_equal(one.values[0], whole.values[1])
    with pytest.raises(RequestRefused, match="no attention pattern for layer 7"):
        session.patterns(LONGER, [7]).result(timeout=60)


def test_induction_scores_are_the_patterns_weight_after_each_earlier_occurrence(session, family):
    from nnterp_widgets.requests.heads import induction_pairs

    roles = session.head_roles(REPEATED).result(timeout=120)
    ids = list(roles.tokens.ids)
    queries, keys = induction_pairs(ids)
    assert queries and all(ids[k - 1] == ids[q] and k < q for q, k in zip(queries, keys, strict=True))
    expected = reference_attention(str(checkpoint(family)), family, REPEATED)
    for layer in range(roles.scores["induction"].shape[0]):
        pattern = expected[("attention_probabilities", layer)][0].cpu().numpy()
        want = pattern[:, queries, keys].mean(-1)
        np.testing.assert_allclose(roles.scores["induction"][layer], want, atol=1e-5)
    top = roles.top("induction", 3)
    assert len(top) == 3 and [score for _, score in top] == sorted((s for _, s in top), reverse=True)
    assert top[0][0] == roles.best("induction")
    plain = session.head_roles("The Eiffel Tower is in").result(timeout=120)
    assert np.isnan(plain.scores["induction"]).all()  # nothing repeats
    probe = session.induction_probe(8, seed=1)
    assert len(probe) == 16 and probe[:8] == probe[8:] and probe == session.induction_probe(8, seed=1)
    assert session.head_roles(probe).result(timeout=120).tokens.ids == tuple(probe)
    with pytest.raises(ValueError, match="unknown role"):
        roles.top("copying")


def test_a_whole_value_comes_back_as_a_tensor_equal_to_transformers(session, family):
    """`value(..., full=True)`: the whole value, not a preview (the dimension a preview
    cuts off shows), as a CPU tensor; memory-guarded; a summary alone stays small."""
    expected = reference_values(str(checkpoint(family)), family, LONGER)
    found = re.findall(r'"id": "([^"]*\.1\.mlp\.mlp_output)"', json.dumps(session.tree()))
    value_id = found[0]  # the family's own module path to layers[1].mlp
    whole = session.value(LONGER, value_id, full=True).result(timeout=120)
    assert isinstance(whole.tensor, torch.Tensor) and whole.tensor.device.type == "cpu"
    want = expected[("mlp_output", 1)].cpu()
    assert tuple(whole.tensor.shape) == tuple(want.shape) == whole.shape
    torch.testing.assert_close(whole.tensor.float(), want.float(), atol=1e-4, rtol=1e-4)
    assert whole.tensor.shape[-1] > whole.preview.shape[-1]  # more than the preview's columns
    assert session.value(LONGER, value_id).result(timeout=120).tensor is None
    session.max_result_bytes = 4096  # over the preview's 2 KiB, under the whole value
    try:
        with pytest.raises(ResultTooLarge):
            session.value(LONGER + " !", value_id, full=True).result(timeout=60)
        assert session.value(LONGER + " !", value_id).result(timeout=120).tensor is None  # the summary fits
    finally:
        session.max_result_bytes = MAX_RESULT_BYTES


def test_attribution_at_a_position_is_transformers_there_and_adds_up(session, family, hf):
    """`attribute(..., position=p)`: every part's direct effect on what the model predicts
    after token ``p``, held to transformers' textbook computation at that position."""
    from nnterp_widgets.requests.sites import InterventionError

    ids = session.tokenizer()(LONGER)["input_ids"]
    position = 4
    with torch.no_grad():
        expected = hf[0](torch.tensor([ids], device=devices.DEVICE)).logits[0, position]
    answer, foil = (int(i) for i in expected.topk(2).indices)
    got = session.attribute(LONGER, answer, foil, position=position).result(timeout=120)
    want = reference_attribution(str(checkpoint(family)), family, LONGER, answer, foil, position)
    scale = max(1.0, abs(got.metric))
    assert got.position == position and abs(got.total - got.metric) < 1e-4 * scale
    np.testing.assert_allclose(got.metric, want["metric"], atol=1e-4 * scale)
    np.testing.assert_allclose(got.heads, want["heads"], atol=1e-4 * scale)
    np.testing.assert_allclose(got.mlps, want["mlps"], atol=1e-4 * scale)
    np.testing.assert_allclose(got.embedding, want["embedding"], atol=1e-4 * scale)
    assert session.attribute(LONGER, answer, foil).result(timeout=120).position == len(ids) - 1
    with pytest.raises(InterventionError, match=rf"outside this {len(ids)}-token prompt"):
        session.attribute(LONGER, answer, foil, position=len(ids)).result(timeout=60)
    assert session.attribute(LONGER, answer, foil, position=-len(ids)).result(timeout=120).position == 0


def test_steering_at_some_positions_is_transformers_greedy_with_the_same_addition(session, family, hf):
    """`steer(positions=, decode=)`: the vector at the listed prompt positions (and every
    written token with ``decode``), the tokens transformers writes greedily with the same
    addition in a forward hook (its prefill, then one token a step from its cache)."""
    model, tokenizer = hf
    ids = tokenizer(LONGER)["input_ids"]
    layer, tokens = 1, 6
    vector = session.steering_vector("Paris is a city in France.", "The river runs to the sea.", layer).result(60)
    added = torch.as_tensor(np.array(vector)) * 8.0
    block = _get(model, names_of(family).layers)[layer]
    for positions, decode in (([2, -1], False), ([0], True)):
        chosen = sorted(p % len(ids) for p in positions)

        def hook(module, args, output, chosen=chosen, decode=decode):
            stream = (output[0] if isinstance(output, tuple) else output).clone()
            if stream.shape[1] == len(ids):
                stream[:, chosen] += added.to(stream)
            elif decode:
                stream += added.to(stream)
            return (stream, *output[1:]) if isinstance(output, tuple) else stream

        handle = block.register_forward_hook(hook)
        try:
            with torch.no_grad():
                out = model.generate(
                    torch.tensor([ids], device=devices.DEVICE),
                    max_new_tokens=tokens,
                    do_sample=False,
                    pad_token_id=model.config.eos_token_id,
                )
        finally:
            handle.remove()
        got = session.steer(LONGER, vector, layer, 8.0, tokens, positions=positions, decode=decode).result(120)
        assert list(got.steered.generated.ids) == out[0, len(ids) :].tolist(), (positions, decode)
