"""A generation's data objects, pictures and HTML export, on a hand-built result.

No engine: a `GenerationResult` built with numpy (its numbers are held to transformers
in tests/test_generation.py). The pictures must show exactly the data, outline the
step shown, and let token text be text only; the export must carry the decode step's
reason and every figure, self-contained.
"""

from __future__ import annotations

import html
from dataclasses import replace
import re

import numpy as np
import pytest

from nnterp_widgets.components.vllm.attention import DECODE
from nnterp_widgets.requests.generation import MODES, STEP_RANGE, GenerationResult, GenerationStep, LensModes, Target
from nnterp_widgets.requests.common import Tokens
from nnterp_widgets.figures.html import generation_section
from nnterp_widgets.widgets.export import export_generation_html, export_html
from nnterp_widgets.figures.transport import for_widget, heatmap_matrix
from nnterp_widgets.figures.tokens import show_token
from nnterp_widgets.figures.generation import MODE_STYLES, generation_lens_figure, lens_mode_figure
from test_export import _decode, _figures, synthetic_result, synthetic_tree

XSS = "<img src=x onerror=alert(1)>"
XSS_SHOWN = "&lt;img␣src=x␣onerror=alert(1)&gt;"
PROMPT_TEXTS = ("The", " tower", " is")
WRITTEN = (" Paris", XSS, " is")
LAYERS, K = 2, 3
GATED = "a gated MLP <b>reason</b>"
PATTERN = ("self_attn.attention_scores", "self_attn.attention_probabilities")


def availability(step: int) -> dict:
    found = {"mlp.mlp_activation": GATED, "self_attn.attention_queries": None}
    found.update({name: (DECODE if step else None) for name in PATTERN})
    return found


def make_generation(target: bool = True, seed: int = 0) -> GenerationResult:
    rng = np.random.default_rng(seed)
    prompt_length, steps = len(PROMPT_TEXTS), len(WRITTEN)
    ids = tuple(range(10, 10 + prompt_length + steps))
    tokens = Tokens(ids, PROMPT_TEXTS + WRITTEN)
    built = []
    for i in range(steps):
        probs = np.sort(rng.random((LAYERS, K), dtype=np.float32), -1)[:, ::-1] / K
        lens_ids = rng.integers(0, 50, (LAYERS, K))
        lens_ids[-1, 0] = ids[prompt_length + i]
        texts = tuple(
            tuple(XSS if (layer, j) == (0, 0) else f"t{layer}{j}" for j in range(K)) for layer in range(LAYERS)
        )
        built.append(
            GenerationStep(
                index=i,
                position=prompt_length - 1 + i,
                token=ids[prompt_length + i],
                text=WRITTEN[i],
                lens_ids=lens_ids,
                lens_probs=probs,
                lens_texts=texts,
                model_ids=lens_ids[-1],
                model_probs=probs[-1],
                model_texts=texts[-1],
                availability=availability(i),
            )
        )
    lens = np.stack([s.lens_probs for s in built], axis=1)  # [layers, steps, k]
    modes = LensModes(
        columns=Tokens(ids[prompt_length:], WRITTEN),
        positions=tuple(s.position for s in built),
        top_ids=np.stack([s.lens_ids[:, 0] for s in built], axis=1),
        top_probs=lens[..., 0],
        top_texts=tuple(tuple(s.lens_texts[layer][0] for s in built) for layer in range(LAYERS)),
        entropy=rng.random((LAYERS, steps), dtype=np.float32) * 3,
        target=Target(7, XSS) if target else None,
        probability=lens[..., 1] if target else None,
        rank=rng.integers(1, 3000, (LAYERS, steps)) if target else None,
    )
    return GenerationResult("The tower is", tokens, prompt_length, tuple(built), modes, {"temperature": 0.0})


@pytest.fixture(scope="module")
def generation():
    return make_generation()


# -- data ---------------------------------------------------------------------------------


def test_result_views(generation):
    assert generation.generated.texts == WRITTEN and generation.prompt_tokens.texts == PROMPT_TEXTS
    assert generation.text == "".join(WRITTEN)
    assert generation.steps[0].is_prefill and not generation.steps[1].is_prefill
    assert generation.steps[1].unavailable() == {"mlp.mlp_activation": GATED, **{n: DECODE for n in PATTERN}}
    panel = generation.lens
    assert panel.top_ids.shape == (LAYERS, 3, K) and panel.tokens == generation.generated
    np.testing.assert_array_equal(panel.top_probs[:, 1], generation.steps[1].lens_probs)
    assert generation.step(-1) is generation.steps[2]
    with pytest.raises(IndexError, match=re.escape(STEP_RANGE.format(step=3, last=2))):
        generation.step(3)


def test_results_are_immutable(generation):
    step = generation.steps[0]
    with pytest.raises(ValueError):
        step.lens_probs[0, 0] = 1.0
    with pytest.raises(TypeError):
        step.availability["mlp.mlp_activation"] = None
    with pytest.raises(AttributeError):
        generation.prompt_length = 0  # frozen


def test_bad_shapes_are_refused(generation):
    step = generation.steps[0]
    with pytest.raises(ValueError, match="model_ids"):
        GenerationStep(
            0,
            2,
            step.token,
            step.text,
            step.lens_ids,
            step.lens_probs,
            step.lens_texts,
            step.model_ids[:2],
            step.model_probs,
            step.model_texts,
        )
    with pytest.raises(ValueError, match="out of order"):
        GenerationResult("p", generation.tokens, 3, generation.steps[::-1], generation.modes)
    with pytest.raises(ValueError, match="tokens for a"):
        GenerationResult("p", generation.tokens, 2, generation.steps, generation.modes)
    modes = generation.modes
    with pytest.raises(ValueError, match="come with a target"):
        replace(modes, target=None)
    with pytest.raises(ValueError, match="rank starts at 1"):
        replace(modes, rank=modes.rank * 0)


def test_modes(generation):
    modes = generation.modes
    assert modes.modes() == tuple(MODES) and set(MODE_STYLES) == set(MODES)
    np.testing.assert_array_equal(modes.values("rank"), modes.rank)
    with pytest.raises(ValueError, match="unknown lens mode 'logits'"):
        modes.values("logits")
    plain = make_generation(target=False).modes
    assert plain.modes() == ("top-1", "entropy")
    with pytest.raises(ValueError, match="follow a target first"):
        lens_mode_figure(plain, "probability")


# -- pictures -------------------------------------------------------------------------------


def test_generation_lens_shows_the_steps(generation):
    fig = generation_lens_figure(generation, step=1)
    (trace,) = fig.data
    np.testing.assert_array_equal(np.asarray(trace.z), generation.lens.top1_probs())
    # Each column: its step, then the token the step wrote.
    assert list(fig.layout.xaxis.ticktext) == ["0 ␣Paris", f"1 {XSS_SHOWN}", "2 ␣is"]
    (shape,) = fig.layout.shapes
    assert (shape.x0, shape.x1, shape.name) == (0.5, 1.5, "step")
    assert "step 1: a decode step" in fig.layout.title.text
    assert "step %{x:d}" in trace.hovertemplate
    assert XSS not in fig.to_json() and "onerror" in fig.to_json()  # escaped, not dropped
    assert not generation_lens_figure(generation).layout.shapes
    with pytest.raises(IndexError, match="steps 0..2"):
        generation_lens_figure(generation, step=5)


@pytest.mark.parametrize("mode", list(MODES))
def test_lens_mode_figures_hold_the_data(generation, mode):
    modes = generation.modes
    fig = lens_mode_figure(modes, mode, selected=2)
    (trace,) = fig.data
    values = modes.values(mode)
    want = np.log10(values) if mode == "rank" else values
    np.testing.assert_allclose(np.asarray(trace.z), want, rtol=1e-6)
    assert bool(trace.reversescale) == (mode in ("rank", "entropy"))
    custom = np.asarray(trace.customdata, dtype=object)
    assert custom.shape == (LAYERS, 3, 5)
    assert custom[0, 1, 1] == XSS_SHOWN and custom[0, 0, 2] == XSS_SHOWN
    if mode == "rank":
        assert custom[1, 2, 4] == str(int(values[1, 2])) and trace.text[1][2] == str(int(values[1, 2]))
        assert trace.colorbar.ticktext[0] == "1"
    (shape,) = fig.layout.shapes
    assert (shape.x0, shape.x1) == (1.5, 2.5)
    if mode in ("probability", "rank"):
        assert XSS_SHOWN in fig.layout.title.text
    assert XSS not in fig.to_json()
    columns = for_widget(fig).data[0]
    np.testing.assert_allclose(heatmap_matrix(columns), want, rtol=1e-6)
    assert np.asarray(columns.z).ndim == 1


# -- export --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def page(generation):
    return export_generation_html(generation, step=1)


def test_export_is_self_contained_and_escaped(page):
    scripts = re.findall(r"<script\b[^>]*>", page, re.I)
    assert scripts and not any("src=" in tag.lower() for tag in scripts)
    assert XSS not in page and "<img" not in page.lower() and "<b>reason" not in page
    assert html.escape(show_token(XSS)) in page  # the chip: shown by the one token rule, escaped


def test_export_shows_each_steps_availability(page, generation):
    rows = re.findall(r'<tr class="step( selected)?" data-step="(\d)">(.*?)</tr>', page, re.S)
    assert [(bool(s), int(i)) for s, i, _ in rows] == [(False, 0), (True, 1), (False, 2)]
    assert "every value served on the prefill" in rows[0][2] and DECODE not in html.unescape(rows[0][2])
    for _, _, cells in rows[1:]:
        text = html.unescape(cells)
        assert ", ".join(PATTERN) in text and DECODE in text
        assert GATED not in text  # unavailable on every step: not this step's news
    assert html.escape(show_token(generation.steps[1].model_texts[0])) in rows[1][2]


def test_export_holds_the_figures(page, generation):
    figures = _figures(page)
    assert set(figures) == {
        "nnw-generation-lens",
        "nnw-generation-probability",
        "nnw-generation-rank",
        "nnw-generation-entropy",
    }
    np.testing.assert_array_equal(_decode(figures["nnw-generation-lens"]["data"][0]["z"]), generation.lens.top1_probs())
    np.testing.assert_allclose(_decode(figures["nnw-generation-entropy"]["data"][0]["z"]), generation.modes.entropy)
    assert len(figures["nnw-generation-rank"]["layout"]["shapes"]) == 1
    chips = re.findall(r'<span class="chip( generated)?( selected)?" title="token (\d+)">', page)
    assert [(bool(g), bool(s), int(i)) for g, s, i in chips][:6] == [
        (False, False, 0),
        (False, False, 1),
        (False, False, 2),
        (True, False, 3),
        (True, True, 4),
        (True, False, 5),
    ]


def test_prompt_export_with_a_generation(tmp_path, generation):
    path = tmp_path / "both.html"
    section = generation_section(generation, 0, plotlyjs=False)
    text = export_html(synthetic_result(), synthetic_tree(), sections=[section], path=path)
    assert path.read_text(encoding="utf-8") == text
    assert set(_figures(text)) >= {"nnw-attention", "nnw-lens", "nnw-generation-lens"}
    assert generation_section(generation, 0, plotlyjs=False) in text  # plotly.js once, with the prompt's figures
    assert text.count("Plotly.newPlot") == 2 + 4  # attention, lens; generation lens, three modes
    plain = export_generation_html(make_generation(target=False))
    assert set(_figures(plain)) == {"nnw-generation-lens", "nnw-generation-entropy"}
