"""Family lookup without an engine: known families, and a clear error for others."""

from __future__ import annotations

import pytest

from nnterp_widgets.families.vllm import KNOWN, UnknownFamily, family_for


def test_unknown_model_type_names_the_known_families():
    with pytest.raises(UnknownFamily) as error:
        family_for("bert")
    message = str(error.value)
    assert "'bert'" in message
    for name in KNOWN:
        assert name in message


def test_unknown_checkpoint_fails_before_any_engine(tmp_path):
    from transformers import BertConfig

    BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=1, intermediate_size=32).save_pretrained(tmp_path)
    from nnterp_widgets import StandardizedVLLM

    with pytest.raises(UnknownFamily, match="known families are"):
        StandardizedVLLM(tmp_path)


def test_conventions():
    assert family_for("qwen2").convention == "fused pair"
    assert family_for("gpt2").convention == "plain stream"
