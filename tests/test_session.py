"""The session on a real engine: one request per prompt feeds every panel; coalescing,
error isolation; panel data held to transformers (float32, eager)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import devices
from conftest import open_session
from nnterp_widgets.checkpoints import checkpoint
from nnterp_widgets.session import ProbeError, Superseded
from reference import hf_model, reference_attention, reference_values

PROMPT = "The Eiffel Tower is in"
MARKUP = "Paris <img src=x onerror=alert(1)> is"


@pytest.fixture(scope="module")
def result(session):
    return session.prompt(PROMPT).result(timeout=120)


def _hf_lens(path: str, prompt: str) -> torch.Tensor:
    """The logit lens in transformers: final norm + lm_head on each block's output."""
    model, _ = hf_model(path)
    streams = reference_values(path, "qwen2", prompt)
    rows = []
    with torch.no_grad():
        for i in range(model.config.num_hidden_layers):
            stream = streams[("layer_output", i)]
            rows.append(torch.softmax(model.lm_head(model.model.norm(stream)), dim=-1)[0])
    return torch.stack(rows)  # [layers, tokens, vocab]


def test_open_is_once_per_kernel(session):
    again = open_session("qwen2")
    assert again is session
    assert session.engine_opens == 1


def test_lens_matches_transformers(session, result):
    path = str(checkpoint("qwen2"))
    lens = _hf_lens(path, PROMPT)
    top = lens.topk(result.lens.top_ids.shape[-1], dim=-1)
    np.testing.assert_array_equal(result.lens.top_ids, top.indices.cpu().numpy())
    np.testing.assert_allclose(result.lens.top_probs, top.values.cpu().numpy(), atol=1e-5)
    tokenizer = session.tokenizer()
    assert result.lens.top1_texts()[0][0] == tokenizer.decode([int(top.indices[0, 0, 0])])


def test_last_lens_row_is_the_models_prediction(result):
    np.testing.assert_array_equal(result.lens.top_ids[-1, -1], result.lens.model_top_ids)
    np.testing.assert_allclose(result.lens.top_probs[-1, -1], result.lens.model_top_probs, atol=1e-5)


def test_patterns_match_transformers(result):
    expected = reference_attention(str(checkpoint("qwen2")), "qwen2", PROMPT)
    assert sorted(result.patterns) == [0, 1]
    for layer, pattern in result.patterns.items():
        want = expected[("attention_probabilities", layer)][0].cpu().numpy()
        np.testing.assert_allclose(pattern, want, atol=1e-5)
        panel = result.attention(layer)
        np.testing.assert_array_equal(panel.head(1), pattern[1])
        assert len(panel.to_bytes()) == pattern.size * 4
    with pytest.raises(IndexError, match="no attention pattern for layer 7"):
        result.attention(7)
    with pytest.raises(IndexError, match="head 9 is out of range"):
        result.attention(0).head(9)


def test_value_previews_match_transformers(session, result):
    expected = reference_values(str(checkpoint("qwen2")), "qwen2", PROMPT)
    engine_path = "model.model.layers.1"
    summary = result.values[f"{engine_path}.layer_output"]
    want = expected[("layer_output", 1)][0]
    assert summary.shape == tuple(expected[("layer_output", 1)].shape)
    np.testing.assert_allclose(summary.preview, want[:, : summary.preview.shape[1]].cpu().numpy(), atol=1e-4)
    assert summary.stats["max"] == pytest.approx(float(want.max()), abs=1e-4)
    neurons = result.values[f"{engine_path}.mlp.mlp_neurons"]
    np.testing.assert_allclose(neurons.preview, expected[("mlp_neurons", 1)][0][:, :16].cpu().numpy(), atol=1e-4)
    assert f"{engine_path}.mlp.mlp_activation" not in result.values  # unavailable: never read


def test_tree_shows_shapes_and_reasons(session, result):
    (root,) = session.tree(result)
    assert root["type"] == "Qwen2ForCausalLM"
    values = {}

    def walk(node):
        for value in node["values"]:
            values[value["id"]] = value
        for child in node["children"]:
            walk(child)

    walk(root)
    tokens = len(result.tokens)
    assert values["model.model.layers.0.layer_output"]["shape"] == [1, tokens, 128]
    gated = values["model.model.layers.0.mlp.mlp_activation"]
    assert not gated["available"] and gated["reason"].startswith("a gated MLP on vLLM")
    assert values["model.lm_head_output"]["reason"].startswith("vLLM never calls lm_head")
    assert values["model.model.layers.0.self_attn.attention_probabilities"]["writable"] is False
    assert values["model.model.layers.0.self_attn.attention_queries"]["writable"] is True


def test_rapid_prompts_coalesce_and_last_wins(session):
    before = session.engine_requests
    futures = [session.prompt(f"{PROMPT} {'Paris ' * i}", key="burst") for i in range(30)]
    last = futures[-1].result(timeout=120)
    assert last.prompt == f"{PROMPT} {'Paris ' * 29}"
    served = session.engine_requests - before
    assert served <= 2, served
    superseded = [f for f in futures[:-1] if isinstance(f.exception(timeout=120), Superseded)]
    assert len(superseded) >= 28


def test_bad_requests_fail_alone(session, result):
    with pytest.raises(ProbeError, match="empty"):
        session.prompt("   ").result(timeout=60)
    with pytest.raises(ProbeError, match="max_model_len=64"):
        session.prompt("Paris " * 80).result(timeout=60)

    def broken(engine):
        raise ValueError("a widget's request went wrong")

    with pytest.raises(ValueError, match="went wrong"):
        session.request("broken", broken).result(timeout=60)
    again = session.prompt(PROMPT).result(timeout=120)
    np.testing.assert_array_equal(again.lens.top_ids, result.lens.top_ids)


def test_markup_tokens_are_plain_text(session):
    markup = session.prompt(MARKUP).result(timeout=120)
    assert "".join(markup.tokens.texts) == MARKUP
    assert any("<" in text for text in markup.tokens.texts)
    labels = markup.tokens.labels()
    assert len(set(labels)) == len(labels)  # repeated tokens kept apart


def test_open_says_device_and_dtype(session):
    assert session.device.split()[0] == devices.DEVICE  # "cpu", or "cuda (NVIDIA H200)"
    assert session.dtype == "float32"  # asked for by the tests: fidelity keeps float32
