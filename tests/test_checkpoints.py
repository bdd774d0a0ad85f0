"""The tiny checkpoints: cached, rebuilt when missing, deterministic, readable tokens."""

from __future__ import annotations

import hashlib

import pytest

from nnterp_widgets.checkpoints import COMPLETE, checkpoint, specs


def _digest(path):
    return hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()


def test_cached_and_rebuilt_when_missing(tmp_path):
    first = checkpoint("gpt2", root=tmp_path)
    stamp = (first / "model.safetensors").stat().st_mtime_ns
    assert checkpoint("gpt2", root=tmp_path) == first
    assert (first / "model.safetensors").stat().st_mtime_ns == stamp  # not rebuilt
    (first / COMPLETE).unlink()  # an interrupted build
    again = checkpoint("gpt2", root=tmp_path)
    assert (again / COMPLETE).exists()
    assert (again / "model.safetensors").stat().st_mtime_ns != stamp


def test_same_spec_same_weights(tmp_path):
    a = checkpoint("gpt2", root=tmp_path / "a")
    b = checkpoint("gpt2", root=tmp_path / "b")
    assert _digest(a) == _digest(b)


def test_tokens_are_words():
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoint("qwen2"))
    ids = tokenizer("The Eiffel Tower is in")["input_ids"]
    assert [tokenizer.decode([i]) for i in ids] == ["The", " Eiffel", " Tower", " is", " in"]


def test_unknown_name():
    with pytest.raises(ValueError, match="known ones are: .*qwen2"):
        checkpoint("no-such-model")


@pytest.mark.parametrize("name", ["qwen2", "gpt2"])
def test_head_size_served_by_cpu_attention(name, tmp_path):
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(checkpoint(name, root=tmp_path))
    assert config.hidden_size // config.num_attention_heads in (32, 64)
    assert name in specs()


def test_the_demo_checkpoint_is_trained_to_say_something():
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = checkpoint("qwen2")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    ids = tokenizer("The Eiffel Tower is in", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        top = model(ids).logits[0, -1].argmax()
    assert tokenizer.decode([int(top)]) == " Paris"
