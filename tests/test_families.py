"""Every family on a real vLLM CPU engine, held to transformers (float32) on its tiny checkpoint.

One engine open at a time (module-scoped, parametrized over every family module), one
trace for every served value, a couple more for the errors. What each family needs
(its checkpoint, where transformers keeps its values, a looser tolerance and why) is
declared in its own module (`Family.checkpoint`, `.reference`, `.tolerance`). The reference is transformers'
eager attention, except where the reference says why not (tests/reference.py: Falcon
on SDPA, Bloom with vLLM's exact GELU).

What the engine's ``token_embeddings`` is: the embedding lookup, the table's rows
for the prompt's ids, on every family. Where the model transforms it before the
first block (Gemma's ``* sqrt(hidden_size)``, Bloom's ``word_embeddings_layernorm``,
GPT-2's position embeddings), that shows in ``layers[0].layer_input``, which is
compared with the first block's input in transformers.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import devices
from conftest import EnginesAhead
from nnterp_widgets.engine.platform import BUILD_LOCK
from nnterp_widgets.families.vllm import family_for, known
from reference import reference_attention, reference_values
from traces import trace_values
from seed_text import SEED_LM_HEAD, SEED_NO_MASK, SEED_GATED, SEED_ROUTED, SEED_LATENT

PROMPT = "The Eiffel Tower is in"
GREEDY = dict(temperature=0.0, max_tokens=1)
TOL = dict(atol=1e-4, rtol=1e-4)
ROOT = {"lm_head_output": SEED_LM_HEAD, "attention_mask": SEED_NO_MASK}
#: Every reason a family may give for a block value: the seed's own words.
SEED_REASONS = {SEED_GATED, SEED_ROUTED, SEED_LATENT}


def _tolerance(engine) -> dict:
    return engine.family.tolerance or TOL


def _dense_blocks(engine) -> list[int]:
    """Blocks whose MLP the family serves as dense inside a mixture of experts (its
    per-block overrides for this checkpoint's config)."""
    from nnterp_widgets.components.vllm.mlp import GatedMLP
    from transformers import AutoConfig

    family = engine.family
    if family.block_overrides is None:
        return []
    config = AutoConfig.from_pretrained(str(engine.args[0]))
    overrides = family.block_overrides(config)
    return [i for i in range(engine.num_layers) if overrides.get(f"{family.layers}.{i}.{family.mlp}") is GatedMLP]


ATTENTION_INTERIOR = (
    "attention_queries",
    "attention_keys",
    "attention_values",
    "attention_head_outputs",
    "attention_probabilities",
)


@pytest.fixture(scope="module")
def engines_ahead(request):
    """Each family's engine opens while the one before is tested (`EnginesAhead`): the
    families this run selected, in the order pytest runs them."""
    selected = {
        item.callspec.params.get("engine")
        for item in request.session.items
        if item.module is request.module and hasattr(item, "callspec")
    }
    ahead = EnginesAhead([name for name in known() if name in selected])
    yield ahead
    ahead.close()


@pytest.fixture(autouse=True)
def not_during_a_build():
    """A test runs while no engine's tree is being built on `EnginesAhead`'s thread: a
    build patches process-wide state (a torch.fx trace patches ``Module.__call__``),
    which a transformers forward on this thread would run into. The build's long part,
    the engine's processes starting, does not hold the lock."""
    with BUILD_LOCK:
        yield


@pytest.fixture(scope="module", params=known())
def engine(request, engines_ahead):
    name = request.param
    family = family_for(name)
    try:
        model = engines_ahead.take(name)
    except Exception as error:
        # A family vLLM no longer runs (mpt) is declared with the engine's own error; its
        # tests skip with that error while vLLM refuses it, and run once it does not.
        if family.engine_error is not None and family.engine_error in str(error):
            pytest.skip(f"vLLM does not run {name}: {family.engine_error}")
        raise
    model.family_name = name
    yield model
    model.close()


@pytest.fixture(scope="module")
def values(engine):
    return trace_values(engine, PROMPT)


@pytest.fixture(scope="module")
def reference(engine):
    with BUILD_LOCK:  # see not_during_a_build
        return reference_values(str(engine.args[0]), engine.family_name, PROMPT)


def _close(got, want, key, tol=TOL):
    assert got.shape == want.shape, (key, tuple(got.shape), tuple(want.shape))
    torch.testing.assert_close(got.float(), want.float(), **tol, msg=lambda m: f"{key}: {m}")


def test_values_match_transformers(engine, values, reference):
    assert values["input_ids"].tolist() == reference["input_ids"].tolist()
    tokens = reference["input_ids"].shape[1]
    assert values["input_size"] == torch.Size([1, tokens])
    tol = _tolerance(engine)
    # The lookup on both sides (see the module docstring).
    _close(values["token_embeddings"], reference["token_embeddings"], "token_embeddings")
    for i in range(engine.num_layers):
        for name in ("layer_input", "attention_output", "mlp_output", "layer_output"):
            _close(values[(name, i)], reference[(name, i)], (name, i), tol)
        if values["plan"][i]["neurons"]:
            _close(values[("mlp_neurons", i)], reference[("mlp_neurons", i)], ("mlp_neurons", i), tol)
    _close(values["logits"], reference["logits"], "logits", tol)
    assert values[("layer_output", 0)].shape == (1, tokens, engine.hidden_size)
    assert values["logits"].shape == (1, 1, engine.vocab_size)


def test_plain_activation_is_the_neurons(engine, values):
    for i in range(engine.num_layers):
        if values["plan"][i]["activation"]:
            assert torch.equal(values[("mlp_activation", i)], values[("mlp_neurons", i)])


def test_block_identity(engine, values):
    for i in range(engine.num_layers):
        total = values[("layer_input", i)] + values[("attention_output", i)] + values[("mlp_output", i)]
        torch.testing.assert_close(
            total, values[("layer_output", i)], atol=1e-5, rtol=1e-5, msg=lambda m: f"layer {i}: {m}"
        )
        if i + 1 < engine.num_layers:
            assert torch.equal(values[("layer_output", i)], values[("layer_input", i + 1)])


def test_lens_on_last_stream_is_logits(values):
    assert values["lens"].shape == values["logits"].shape
    assert (values["lens"] - values["logits"]).abs().max().item() < 5e-5


def test_attention_interior_matches_transformers(engine, values):
    served = [i for i in range(engine.num_layers) if values["plan"][i]["interior"]]
    if not served:
        assert engine.family_name in ("deepseek_v2", "deepseek_v3")
        return
    expected = reference_attention(str(engine.args[0]), engine.family_name, PROMPT)
    tokens = values["input_ids"].shape[1]
    for i in served:
        for name in ATTENTION_INTERIOR:
            _close(values[(name, i)], expected[(name, i)], (name, i), _tolerance(engine))
        # The recomputed pattern hides exactly what transformers' pattern gives no
        # weight (causal mask, sliding window).
        hidden = torch.isneginf(values[("attention_scores", i)])
        assert torch.equal(hidden, expected[("attention_probabilities", i)] == 0), i
    assert values[("attention_queries", served[0])].shape == (1, engine.num_heads, tokens, engine.head_dim)
    assert values[("attention_keys", served[0])].shape == (1, engine.num_kv_heads, tokens, engine.head_dim)
    assert values[("attention_head_outputs", served[0])].shape == (1, tokens, engine.num_heads, engine.head_dim)


def test_support_lists_the_declared_reasons(engine):
    support = engine.support()
    expected = {**ROOT, **engine.family.unavailable()}
    assert {name: reason for name, reason in support.items() if reason} == expected
    assert set(engine.family.unavailable().values()) <= SEED_REASONS
    assert support["mlp.mlp_output"] is None
    assert support["self_attn.attention_output"] is None


def test_dense_blocks_serve_their_neurons(engine, values):
    dense = _dense_blocks(engine)
    if not dense:
        return
    for i in range(engine.num_layers):
        mlp = engine.layers[i].mlp
        if i in dense:
            assert values["plan"][i]["neurons"], i
            assert mlp.unavailable_reason("mlp_activation") == SEED_GATED
        else:
            assert mlp.unavailable_reason("mlp_neurons") == SEED_ROUTED
            assert mlp.unavailable_reason("mlp_activation") == SEED_ROUTED


def _an_unavailable_block_value(engine):
    """(envoy, name, reason) of one value the family's last block cannot serve."""
    layer = engine.layers[engine.num_layers - 1]
    for host in (layer.self_attn, layer.mlp):
        for name, reason in type(host).UNAVAILABLE.items():
            return host, name, reason
    return engine, "attention_mask", SEED_NO_MASK


def test_unavailable_inside_a_trace(engine, values):
    host, name, reason = _an_unavailable_block_value(engine)
    with pytest.raises(RuntimeError) as inside:
        with engine.trace(PROMPT, **GREEDY):
            getattr(host, name).save()
    assert str(inside.value).splitlines()[0] == f"Unavailable: {host.path}.{name} is not available: {reason}"
    # And the engine answers the next request as before.
    with engine.trace(PROMPT, **GREEDY):
        logits = engine.logits.save()
    torch.testing.assert_close(logits, values["logits"])


def test_steer_and_skip_match_transformers(engine):
    # Writes go back in each convention's own layout (a fused pair, a flat stream, the
    # Transformers backend's batch of one): steer block 0's stream and skip the rest, in
    # vLLM and in transformers, and the logits agree.
    vector = torch.linspace(-1, 1, engine.hidden_size)  # the engine's: from the CPU
    here = devices.on_device(vector)  # the reference's: on its device
    kept = {}

    def edit(i, hidden):
        if i == 0:
            kept["stream"] = hidden + here
        return kept["stream"]  # blocks after the first pass their input through

    expected = reference_values(str(engine.args[0]), engine.family_name, PROMPT, edit=edit)
    with engine.trace(PROMPT, **GREEDY):
        engine.steer(0, vector)
        engine.skip_layers(1, engine.num_layers - 1)
        logits = engine.logits.save()
    _close(logits, expected["logits"], "logits", _tolerance(engine))


def test_sizes(engine, values):
    tokens = values["input_ids"].shape[1]
    assert engine.num_layers == len(list(engine.layers))
    assert values[("layer_input", 0)].shape == (1, tokens, engine.hidden_size)
    for i in range(engine.num_layers):
        if values["plan"][i]["neurons"] and not _dense_blocks(engine):
            assert values[("mlp_neurons", i)].shape == (1, tokens, engine.intermediate_size)


def test_attribution_matches_transformers_and_adds_up(engine, values):
    """Direct logit attribution: per head where the family splits its heads (else the
    reason), per MLP and the embedding, held to transformers' textbook computation, and
    the parts add up to the metric (to 1e-4 of its size: float32 sums of ~70 parts)."""
    from nnterp_widgets.requests.attribution import NO_OUT_PROJECTION, POST_NORM, attribute
    from reference import reference_attribution

    logits = values["logits"][0, -1]
    answer, foil = (int(i) for i in logits.topk(2).indices)
    got = attribute(engine, PROMPT, answer, foil)
    scale = max(1.0, abs(got.metric))
    assert abs(got.total - got.metric) < 1e-4 * scale
    assert abs(got.capped_metric - float(logits[answer] - logits[foil])) < 1e-4 * scale
    if got.note is None:  # no softcap: the metric is the sampler's logit difference
        assert abs(got.metric - got.capped_metric) < 1e-4 * scale
    if got.heads_reason is not None:
        assert got.heads_reason in (POST_NORM, NO_OUT_PROJECTION) or got.heads_reason in SEED_REASONS, got.heads_reason
        assert np.isnan(got.heads).all() and got.top_heads() == []
        return
    split = got.heads.sum(axis=1) + got.attention_bias
    np.testing.assert_allclose(split, got.attention, atol=1e-4 * scale)
    with BUILD_LOCK:  # see not_during_a_build
        want = reference_attribution(str(engine.args[0]), engine.family_name, PROMPT, answer, foil)
    np.testing.assert_allclose(got.metric, want["metric"], atol=1e-4 * scale)
    np.testing.assert_allclose(got.heads, want["heads"], atol=1e-4 * scale)
    np.testing.assert_allclose(got.mlps, want["mlps"], atol=1e-4 * scale)
    np.testing.assert_allclose(got.attention, want["attention"], atol=1e-4 * scale)


def test_contributions_match_transformers(engine):
    """The contribution graph's shares (every block, every position), held to the
    formulas in transformers (float64 from the same checkpoint); where the family cannot
    split its heads, the request is refused with the attribution's reason."""
    from nnterp_widgets.requests.attribution import heads_reason
    from nnterp_widgets.requests.contributions import FLOOR, contributions
    from nnterp_widgets.requests.sites import InterventionError
    from reference import reference_contributions

    reason = heads_reason(engine)
    if reason is not None:
        with pytest.raises(InterventionError, match="needs each head's messages"):
            contributions(engine, PROMPT)
        return
    got = contributions(engine, PROMPT)
    with BUILD_LOCK:  # see not_during_a_build
        want = reference_contributions(str(engine.args[0]), engine.family_name, PROMPT)
    for name in ("residual", "bias", "through", "mlp"):
        np.testing.assert_allclose(getattr(got, name), want[name], atol=1e-4, err_msg=name)
    layers, tokens, _ = want["attention"].shape
    dense = np.zeros((layers, tokens, tokens))
    dense[got.edges[:, 0], got.edges[:, 1], got.edges[:, 2]] = got.shares
    expected = np.where(want["attention"] >= FLOOR, want["attention"], 0.0)
    clear = np.abs(want["attention"] - FLOOR) > 1e-4  # a share at the floor may fall either side
    np.testing.assert_allclose(dense[clear], expected[clear], atol=1e-4)
    # Every position's parts share all of its stream.
    total = np.zeros((layers, tokens))
    np.add.at(total, (got.edges[:, 0], got.edges[:, 1]), got.shares)
    assert (total + got.residual + got.bias <= 1 + 1e-4).all()
    np.testing.assert_allclose(got.through + got.mlp, 1.0, atol=1e-4)
