"""The attention and MLP interior, steering and skipping, generation steps.

Real vLLM CPU engine, held to transformers' eager attention (weights returned,
float32) on the tiny checkpoints; one engine open at a time.
"""

from __future__ import annotations

import pytest
import torch

import devices
from reference import reference_attention, reference_values
from traces import trace_values
from seed_text import SEED_DECODE

PROMPT = "The Eiffel Tower is in"
GREEDY = dict(temperature=0.0, max_tokens=1)
TOL = dict(atol=1e-4, rtol=1e-4)
INTERIOR = (
    "attention_queries",
    "attention_keys",
    "attention_values",
    "attention_head_outputs",
    "attention_probabilities",
)


@pytest.fixture(scope="module")
def interior(engine):
    return trace_values(engine, PROMPT)


def test_interior_matches_transformers(engine, interior):
    expected = reference_attention(engine.args[0], engine.family_name, PROMPT)
    tokens = expected[("attention_queries", 0)].shape[2]
    for i in range(engine.num_layers):
        for name in INTERIOR:
            got, want = interior[(name, i)], expected[(name, i)]
            assert got.shape == want.shape, (name, i)
            torch.testing.assert_close(got, want, **TOL, msg=lambda m: f"{name}[{i}]: {m}")
    assert interior[("attention_queries", 0)].shape == (1, engine.num_heads, tokens, engine.head_dim)
    assert interior[("attention_keys", 0)].shape == (1, engine.num_kv_heads, tokens, engine.head_dim)
    assert interior[("attention_head_outputs", 0)].shape == (1, tokens, engine.num_heads, engine.head_dim)


def test_pattern_is_causal_and_normalised(engine, interior):
    for i in range(engine.num_layers):
        pattern = interior[("attention_probabilities", i)]
        scores = interior[("attention_scores", i)]
        torch.testing.assert_close(pattern.sum(-1), torch.ones(pattern.shape[:-1], device=pattern.device))
        upper = torch.triu(torch.ones(pattern.shape[-2:], dtype=torch.bool, device=pattern.device), diagonal=1)
        assert torch.all(pattern[..., upper] == 0)
        assert torch.all(torch.isneginf(scores[..., upper]))
        torch.testing.assert_close(torch.softmax(scores, -1), pattern)


def test_neurons_match_transformers(engine, interior):
    expected = reference_values(engine.args[0], engine.family_name, PROMPT)
    for i in range(engine.num_layers):
        torch.testing.assert_close(interior[("mlp_neurons", i)], expected[("mlp_neurons", i)], **TOL)


def test_head_outputs_reach_the_output_projection(engine, interior):
    # attention_output is the output projection of the heads' outputs.
    path = engine.args[0]
    from reference import hf_model, _get, names_of

    model, _ = hf_model(path)
    layer = _get(model, names_of(engine.family_name).layers)[0]
    attention = _get(layer, names_of(engine.family_name).attention)
    project = attention.o_proj if hasattr(attention, "o_proj") else attention.c_proj
    heads = interior[("attention_head_outputs", 0)]
    with torch.no_grad():
        projected = project(heads.reshape(1, heads.shape[1], -1))
    torch.testing.assert_close(projected, interior[("attention_output", 0)], **TOL)


def test_editing_queries_or_head_outputs_changes_logits(engine, interior):
    attn = engine.layers[0].self_attn
    with engine.trace(PROMPT, **GREEDY):
        attn.attention_queries[:] = 0
        flat = attn.attention_probabilities.save()
        after_queries = engine.logits.save()
    # Zero queries: every visible key scores the same, the pattern is uniform per row.
    rows = torch.arange(1, flat.shape[-1] + 1, dtype=torch.float32, device=flat.device)
    torch.testing.assert_close(flat.max(-1).values[0, 0], 1 / rows)
    assert not torch.allclose(after_queries, interior["logits"], atol=1e-3)
    with engine.trace(PROMPT, **GREEDY):
        attn.attention_head_outputs[:, :, 1] = 0
        after_heads = engine.logits.save()
    assert not torch.allclose(after_heads, interior["logits"], atol=1e-3)
    with engine.trace(PROMPT, **GREEDY):
        keys = attn.attention_keys
        attn.attention_keys = keys * 2
        scaled = attn.attention_scores.save()
    torch.testing.assert_close(scaled, interior[("attention_scores", 0)] * 2, **TOL)


def test_pattern_on_a_decode_step_raises_before_anything_runs(engine):
    attn = engine.layers[1].self_attn
    with engine.trace(PROMPT, temperature=0.0, max_tokens=3, ignore_eos=True):
        pattern = attn.attention_probabilities.save()  # no tracer.iter: the prefill
    tokens = pattern.shape[-1]
    assert pattern.shape == (1, engine.num_heads, tokens, tokens)
    with pytest.raises(RuntimeError) as error:
        with engine.trace(PROMPT, temperature=0.0, max_tokens=2, ignore_eos=True) as tracer:
            for _step in tracer.iter[1]:
                pattern = attn.attention_probabilities.save()
    path = attn.path
    assert str(error.value).splitlines()[0] == (
        f"Unavailable: {path}.attention_probabilities is not available: {SEED_DECODE}"
    )
    assert engine.support()["self_attn.attention_probabilities"] is None
    assert engine.support()["self_attn.attention_scores"] is None


@pytest.mark.parametrize("name", ["attention_probabilities", "attention_scores"])
def test_pattern_is_read_only(engine, name):
    attn = engine.layers[0].self_attn
    with pytest.raises(RuntimeError) as error:
        with engine.trace(PROMPT, **GREEDY):
            setattr(attn, name, getattr(attn, name) * 0)
    assert str(error.value).splitlines()[0] == f"AttributeError: {name} is derived and read-only"


def test_generation_step_shapes(engine):
    with engine.trace(PROMPT, temperature=0.0, max_tokens=3, ignore_eos=True) as tracer:
        shapes = list().save()
        logit_shapes = list().save()
        for _step in tracer.iter[:]:
            shapes.append(engine.layers[0].layer_output.shape)
            logit_shapes.append(engine.logits.shape)
    tokens = len(engine.tokenizer(PROMPT)["input_ids"])
    assert shapes == [torch.Size([1, tokens, engine.hidden_size])] + [torch.Size([1, 1, engine.hidden_size])] * 2
    assert logit_shapes == [torch.Size([1, 1, engine.vocab_size])] * 3


def test_steer_matches_transformers(engine, interior):
    # The vector stays on the CPU, as a user's would: on the GPU run it crosses devices.
    vector = torch.linspace(-2, 2, engine.hidden_size)
    here = devices.on_device(vector)
    expected = reference_values(
        engine.args[0], engine.family_name, PROMPT, edit=lambda i, h: h + 0.5 * here if i == 0 else h
    )
    with engine.trace(PROMPT, **GREEDY):
        engine.steer(0, vector, factor=0.5)
        logits = engine.logits.save()
    torch.testing.assert_close(logits, expected["logits"], **TOL)


def test_foreign_tensors_written_in(engine, interior):
    # What a user writes, steers or skips with may be float64 and on the CPU whatever
    # the engine's dtype and device: the engine maps it, and it acts as the same values
    # in the engine's own dtype would.
    attn = engine.layers[0].self_attn
    vector = torch.linspace(-2, 2, engine.hidden_size, dtype=torch.float64)
    with engine.trace(PROMPT, **GREEDY):
        engine.steer(0, vector.float(), factor=0.5)
        native = engine.logits.save()
    with engine.trace(PROMPT, **GREEDY):
        engine.steer(0, vector, factor=0.5)
        foreign = engine.logits.save()
    torch.testing.assert_close(foreign, native, **TOL)
    assert not torch.allclose(foreign, interior["logits"], atol=1e-3)
    queries = interior[("attention_queries", 0)]
    heads = interior[("attention_head_outputs", 0)]
    with engine.trace(PROMPT, **GREEDY):
        attn.attention_queries = (queries * 0.5).cpu().double()
        attn.attention_head_outputs = (heads * 2).cpu().double()
        foreign = engine.logits.save()
    with engine.trace(PROMPT, **GREEDY):
        attn.attention_queries = queries * 0.5
        attn.attention_head_outputs = heads * 2
        native = engine.logits.save()
    torch.testing.assert_close(foreign, native, **TOL)
    assert not torch.allclose(foreign, interior["logits"], atol=1e-3)
    stream = interior[("layer_input", 0)]
    with engine.trace(PROMPT, **GREEDY):
        engine.skip_layers(0, skip_with=stream.cpu().double())
        foreign = engine.logits.save()
    with engine.trace(PROMPT, **GREEDY):
        engine.skip_layers(0)
        native = engine.logits.save()
    torch.testing.assert_close(foreign, native, **TOL)
    with engine.trace(PROMPT, **GREEDY):
        foreign = engine.project_on_vocab(stream[:, -1:].cpu().double()).save()
        native = engine.project_on_vocab(stream[:, -1:]).save()
    torch.testing.assert_close(foreign, native, **TOL)


def test_skip_layers_passes_the_stream_through(engine):
    last = engine.num_layers - 1
    expected = reference_values(engine.args[0], engine.family_name, PROMPT)
    with engine.trace(PROMPT, **GREEDY):
        engine.skip_layers(0, last)
        logits = engine.logits.save()
    # Every block skipped: the logits are the lens of the first block's input.
    with engine.trace(PROMPT, **GREEDY):
        first = engine.layers[0].layer_input
        direct = engine.project_on_vocab(first[:, -1:]).save()
    torch.testing.assert_close(logits, direct, **TOL)
    assert not torch.allclose(logits, expected["logits"], atol=1e-3)
    with pytest.raises(RuntimeError, match="outside 0"):
        with engine.trace(PROMPT, **GREEDY):
            engine.skip_layers(0, engine.num_layers)


def test_methods_need_a_trace(engine):
    with pytest.raises(RuntimeError, match="inside `with model.trace"):
        engine.steer(0, torch.zeros(engine.hidden_size))
    with pytest.raises(RuntimeError, match="inside `with model.trace"):
        engine.skip_layers(0)
