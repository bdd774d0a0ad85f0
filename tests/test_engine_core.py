"""The engine core on a real vLLM CPU engine, held to transformers (float32, eager).

Parametrized over a gated fused-pair model (qwen2) and a plain-stream model (gpt2);
pytest keeps one engine open at a time.
"""

from __future__ import annotations

import pytest
import torch

import devices
from nnterp_widgets import Unavailable
from nnterp_widgets.engine import edit_in_place
from reference import reference_values
from traces import trace_values
from seed_text import SEED_LM_HEAD, SEED_NO_MASK, SEED_GATED, SEED_PROBS

PROMPT = "The Eiffel Tower is in"
GREEDY = dict(temperature=0.0, max_tokens=1)
TOL = dict(atol=1e-4, rtol=1e-4)


@pytest.fixture(scope="module")
def values(engine):
    return trace_values(engine, PROMPT)


@pytest.fixture(scope="module")
def reference(engine):
    return reference_values(engine.args[0], engine.family_name, PROMPT)


def test_values_match_transformers(engine, values, reference):
    assert values["input_ids"].tolist() == reference["input_ids"].tolist()
    assert values["input_size"] == torch.Size([1, reference["input_ids"].shape[1]])
    tokens = reference["input_ids"].shape[1]
    for key, expected in reference.items():
        if key == "input_ids":
            continue
        got = values[key]
        assert got.shape == expected.shape, key
        torch.testing.assert_close(got.float(), expected, **TOL, msg=lambda m: f"{key}: {m}")
    assert values[("layer_output", 0)].shape == (1, tokens, engine.hidden_size)
    assert values["logits"].shape == (1, 1, engine.vocab_size)
    assert values["next_token_probs"].shape == (1, engine.vocab_size)


def test_block_identity(engine, values):
    for i in range(engine.num_layers):
        total = values[("layer_input", i)] + values[("attention_output", i)] + values[("mlp_output", i)]
        torch.testing.assert_close(total, values[("layer_output", i)], atol=1e-5, rtol=1e-5)


def test_next_block_input_is_this_block_output(engine, values):
    # vLLM's fused add-norm rewrites the residual in place: a saved copy must not move.
    for i in range(engine.num_layers - 1):
        assert torch.equal(values[("layer_output", i)], values[("layer_input", i + 1)])


def test_lens_on_last_stream_is_logits(values):
    assert values["lens"].shape == values["logits"].shape
    assert (values["lens"] - values["logits"]).abs().max().item() < 5e-5


def test_support_listing(engine):
    support = engine.support()
    unavailable = sorted(name for name, reason in support.items() if reason)
    if engine.family_name == "gpt2":
        assert unavailable == ["attention_mask", "lm_head_output"]
    else:
        assert [name for name, reason in support.items() if reason] == [
            "lm_head_output",
            "attention_mask",
            "mlp.mlp_activation",
        ]
        assert support["mlp.mlp_activation"] == SEED_GATED
    assert support["lm_head_output"] == SEED_LM_HEAD
    assert support["attention_mask"] == SEED_NO_MASK
    for name in (
        "layer_input",
        "layer_output",
        "self_attn.attention_output",
        "mlp.mlp_output",
        "mlp.mlp_neurons",
        "token_embeddings",
        "logits",
        "next_token_probs",
        "input_ids",
        "input_size",
    ):
        assert support[name] is None, name


def _first_line(error) -> str:
    return str(error).splitlines()[0]


def _still_answers(engine, values):
    with engine.trace(PROMPT, **GREEDY):
        logits = engine.logits.save()
    torch.testing.assert_close(logits, values["logits"])


@pytest.mark.parametrize("name, reason", [("attention_mask", SEED_NO_MASK), ("lm_head_output", SEED_LM_HEAD)])
def test_unavailable_root_values(engine, values, name, reason):
    message = f"model.{name} is not available: {reason}"
    with pytest.raises(Unavailable) as outside:
        getattr(engine, name)
    assert str(outside.value) == message
    with pytest.raises(Unavailable):
        setattr(engine, name, torch.zeros(1))
    with pytest.raises(RuntimeError) as inside:
        with engine.trace(PROMPT, **GREEDY):
            getattr(engine, name).save()
    assert _first_line(inside.value) == f"Unavailable: {message}"
    _still_answers(engine, values)


def test_gated_activation_unavailable(engine, values):
    mlp = engine.layers[1].mlp
    if engine.family_name == "gpt2":
        with engine.trace(PROMPT, **GREEDY):
            activation = mlp.mlp_activation.save()
            neurons = mlp.mlp_neurons.save()
        assert torch.equal(activation, neurons)
        return
    message = f"model.model.layers.1.mlp.mlp_activation is not available: {SEED_GATED}"
    with pytest.raises(Unavailable, match="is not available"):
        mlp.mlp_activation  # noqa: B018 - reading it is what raises
    with pytest.raises(RuntimeError) as inside:
        with engine.trace(PROMPT, **GREEDY):
            mlp.mlp_activation.save()
    assert _first_line(inside.value) == f"Unavailable: {message}"
    assert type(mlp.act_fn._module).__name__ == "SiluAndMul"
    _still_answers(engine, values)


def test_derived_and_read_only(engine, values):
    with pytest.raises(RuntimeError) as inside:
        with engine.trace(PROMPT, **GREEDY):
            engine.next_token_probs = engine.next_token_probs * 0
    assert _first_line(inside.value) == SEED_PROBS
    with pytest.raises(AttributeError, match="derived from the logits"):
        engine.next_token_probs = torch.zeros(1)
    for name in ("input_ids", "input_size"):
        with pytest.raises(RuntimeError) as inside:
            with engine.trace(PROMPT, **GREEDY):
                setattr(engine, name, getattr(engine, name))
        assert _first_line(inside.value).startswith(f"AttributeError: {name} is read-only")
        with pytest.raises(AttributeError, match=f"{name} is read-only"):
            setattr(engine, name, torch.zeros(1))
    _still_answers(engine, values)


def test_wrong_shape_write_fails_that_request_only(engine, values):
    with pytest.raises(RuntimeError) as inside:
        with engine.trace(PROMPT, **GREEDY):
            engine.layers[0].layer_output = torch.zeros(1, 2, engine.hidden_size)
    assert "must keep its shape" in _first_line(inside.value)
    _still_answers(engine, values)


def test_inplace_edit_and_assignment_match_transformers(engine, values):
    path = engine.args[0]
    shift = devices.on_device(torch.linspace(-1, 1, engine.hidden_size))
    expected = reference_values(path, engine.family_name, PROMPT, edit=lambda i, h: h + shift if i == 0 else h)
    with engine.trace(PROMPT, **GREEDY):
        stream = engine.layers[0].layer_output
        stream += shift  # in place, on the private copy
        after = engine.layers[1].layer_input.save()
        logits = engine.logits.save()
    torch.testing.assert_close(after, expected[("layer_output", 0)], **TOL)
    torch.testing.assert_close(logits, expected["logits"], **TOL)
    with engine.trace(PROMPT, **GREEDY):
        engine.layers[0].layer_output = engine.layers[0].layer_output + shift
        assigned = engine.logits.save()
    torch.testing.assert_close(assigned, expected["logits"], **TOL)
    # And a saved value stays as read, though the stream it came from is edited later.
    with engine.trace(PROMPT, **GREEDY):
        before = engine.layers[0].layer_output.save()
        engine.layers[1].layer_input[:] = 0
        engine.layers[1].layer_output[:] = 0
        zeroed = engine.logits.save()
    torch.testing.assert_close(before, values[("layer_output", 0)])
    assert not torch.allclose(zeroed, values["logits"])


def test_an_edit_in_place_through_the_reader_lands_in_its_own_request_only(engine, reference):
    # edit_in_place writes over the request's span of the step's tensors (no splice of
    # the whole slab): through the reader, which binds no write-back, it still reaches
    # the run, as transformers says; the other invoke of the same step is untouched.
    path = engine.args[0]
    shift = devices.on_device(torch.linspace(-1, 1, engine.hidden_size))
    expected = reference_values(path, engine.family_name, PROMPT, edit=lambda i, h: h + shift if i == 0 else h)
    reader = engine.reader()
    with engine.trace(**GREEDY) as tracer:
        with tracer.invoke(PROMPT):
            edit_in_place(reader.layers[0], "layer_output", lambda stream: stream.add_(shift))
            after = reader.layers[1].layer_input.save()
            edited = reader.logits.save()
        with tracer.invoke(PROMPT):
            other = reader.logits.save()
    torch.testing.assert_close(after, expected[("layer_output", 0)], **TOL)
    torch.testing.assert_close(edited, expected["logits"], **TOL)
    torch.testing.assert_close(other, reference["logits"], **TOL)


def test_logits_assignment_changes_the_sample(engine, values):
    target = int(values["logits"][0, 0].argmin())
    with engine.trace(PROMPT, **GREEDY) as tracer:
        forced = torch.full_like(engine.logits, -1e4)
        forced[..., target] = 1e4
        engine.logits = forced
        result = tracer.result.save()
    assert result.outputs[0].token_ids[0] == target


def test_invokes_are_private_requests(engine, reference):
    # Two prompts of different lengths in one trace: each invoke sees only its own
    # request, as transformers computes each prompt alone.
    other = "Paris is the capital of France"
    alone = reference_values(engine.args[0], engine.family_name, other)
    with engine.trace(**GREEDY) as tracer:
        with tracer.invoke(PROMPT):
            a = engine.layers[-1].layer_output.save()
            la = engine.logits.save()
        with tracer.invoke(other):
            b = engine.layers[-1].layer_output.save()
            lb = engine.logits.save()
    last = engine.num_layers - 1
    torch.testing.assert_close(a, reference[("layer_output", last)], **TOL)
    torch.testing.assert_close(b, alone[("layer_output", last)], **TOL)
    torch.testing.assert_close(la, reference["logits"], **TOL)
    torch.testing.assert_close(lb, alone["logits"], **TOL)
    assert a.shape[1] != b.shape[1]


def test_root_only_serves_the_roots_values_and_ships_a_fraction_of_the_tree(engine, reference):
    from nnsight.intervention.serialization import dumps

    root = engine.root_only()
    last = engine.layers[-1]
    with engine.trace(**GREEDY) as tracer:
        with tracer.invoke(PROMPT):  # this invoke names no full model: the root's copy and one block
            stream = last.layer_output.save()
            logits = root.logits.save()
            probs = root.next_token_probs.save()
    torch.testing.assert_close(logits, reference["logits"], **TOL)
    torch.testing.assert_close(stream, reference[("layer_output", engine.num_layers - 1)], **TOL)
    torch.testing.assert_close(probs.sum(-1), torch.ones_like(probs.sum(-1)))
    # What an invoke naming the copy and one block carries to the worker, against one
    # naming the model (which carries every block: the gap grows with the layers).
    assert engine.num_layers >= 2
    assert len(dumps(root)) + len(dumps(last)) < len(dumps(engine))
    assert engine.layers[0] is not None and len(list(root._children)) == 0  # the model keeps its tree


def test_the_reader_serves_the_standard_values_without_writing_back_and_ships_less(engine, reference):
    from nnsight.intervention.serialization import dumps

    from nnterp_widgets.components.vllm.layer import StandardEnvoy

    reader = engine.reader()
    assert engine.reader() is reader  # built once an engine
    last = engine.num_layers - 1
    with engine.trace(PROMPT, **GREEDY):  # read in the order the forward runs
        attention = reader.layers[0].self_attn.attention_output.save()
        edited = reader.layers[0].layer_output
        edited[:] = 0  # a reader's value is its own copy: this edit stays in it
        after = reader.layers[1].layer_output.save()
        stream = reader.layers[last].layer_output.save()
        logits = reader.logits.save()
    torch.testing.assert_close(stream, reference[("layer_output", last)], **TOL)
    torch.testing.assert_close(attention, reference[("attention_output", 0)], **TOL)
    torch.testing.assert_close(logits, reference["logits"], **TOL)
    torch.testing.assert_close(after, reference[("layer_output", 1)], **TOL)
    with engine.trace(PROMPT, **GREEDY):
        engine.layers[0].layer_output[:] = 0  # through the model, the same edit reaches the run
        moved = engine.layers[1].layer_output.save()
    assert not torch.allclose(moved, reference[("layer_output", 1)], **TOL)
    # Every envoy that serves a standard value is in the reader, and little else.
    served = {envoy.path for envoy in engine.modules() if isinstance(envoy, StandardEnvoy)}
    assert served <= {envoy.path for envoy in reader.modules()}
    assert len(reader.modules()) < len(engine.modules())
    # The engine's workers keep the reader: an invoke names it by id, a few bytes.
    assert reader.__dict__.get("_persistent_id", "").startswith("nnterp-reader-")
    assert len(dumps(reader)) < 100 < len(dumps(engine))


def test_methods_outside_a_trace(engine):
    with pytest.raises(RuntimeError, match="inside `with model.trace"):
        engine.project_on_vocab(torch.zeros(1, 1, engine.hidden_size))
    with pytest.raises(RuntimeError, match="inside `with model.trace"):
        engine.get_topk_closest_tokens(torch.zeros(1, 1, engine.hidden_size), 3)
    with pytest.raises(NotImplementedError) as error:
        engine.order(12)
    assert str(error.value) == (
        "model.order is not supported on the vllm engine; it is measured on a StandardizedTransformer"
    )
    with pytest.raises(NotImplementedError, match="model.rank is not supported"):
        engine.rank(0)


def test_topk_closest_tokens(engine, reference):
    with engine.trace(PROMPT, **GREEDY):
        top = engine.get_topk_closest_tokens(engine.layers[-1].layer_output[:, -1:], 3).save()
    assert top.shape == (1, 1, 3)
    assert top[0, 0].tolist() == reference["logits"][0, 0].topk(3).indices.tolist()


def test_sizes(engine):
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(engine.args[0])
    assert engine.num_layers == config.num_hidden_layers == len(list(engine.layers))
    assert engine.hidden_size == config.hidden_size
    assert engine.num_heads == config.num_attention_heads
    assert engine.head_dim == config.hidden_size // config.num_attention_heads
    assert engine.vocab_size == config.vocab_size
