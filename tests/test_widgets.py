"""The widgets on a real session (engine on the tiny checkpoint), Python side.

What a panel shows is checked against the session's engine values; a prompt change is
one engine request feeding every panel; selection is linked; bad input shows a message
in the widget and the engine keeps serving; token text stays text.
"""

from __future__ import annotations

import html
import json
import re

import numpy as np

from nnterp_widgets.widgets.generation import BRANCH

import devices
import pytest

from nnterp_widgets import AttentionView, Explorer, LogitLens, ModuleTree, PatchPanel
from nnterp_widgets.checkpoints import checkpoint
from nnterp_widgets.requests.generation import GenerationError
from nnterp_widgets.requests.sites import InterventionError
from nnterp_widgets.requests.common import RequestRefused
from nnterp_widgets.widgets.attention_text import text_view_state
from nnterp_widgets.figures.transport import heatmap_matrix
from nnterp_widgets.figures.common import escape_token
from nnterp_widgets.figures.lens import lens_hover
from nnterp_widgets.figures.tokens import show_token
from reference import reference_attention, reference_values
from test_export import _decode, _figures

PROMPT = "The Eiffel Tower is in"


def _click(x):
    from plotly.callbacks import Points

    return Points(point_inds=[0], xs=[x], ys=[0], trace_name="t", trace_index=0)


MARKUP = "Paris <img src=x onerror=alert(1)> is"


@pytest.fixture()
def explorer(session):
    view = Explorer(session, prompt=PROMPT)
    view.wait(120)
    yield view
    view.close()


def test_close_unsubscribes_from_the_session(session):
    before = session.subscribers
    view = Explorer(session, prompt=PROMPT)
    assert session.subscribers == before + 1
    view.wait(120)
    view.close()
    assert session.subscribers == before  # a re-run cell leaves no explorer behind
    assert view.comm is None and view.tree.comm is None and view.attention.figure.comm is None


def test_figures_are_made_when_first_drawn_and_closing_makes_none(session):
    from nnterp_widgets.widgets.attribution import AttributionPanel

    view = Explorer(session, prompt=PROMPT)
    view.wait(120)
    # The prompt's panels have drawn; a tool that never ran has made no figure yet.
    assert AttentionView.figure.made(view.attention) is not None
    assert LogitLens.figure.made(view.lens) is not None
    assert PatchPanel.figure.made(view.patching) is None and AttributionPanel.figure.made(view.attribution) is None
    view.close()
    assert PatchPanel.pair_figure.made(view.patching) is None  # closing made none either
    assert view.lens.figure.comm is None


def test_one_request_feeds_every_panel(session, explorer):
    before = session.engine_requests
    explorer.prompt_box.value = "The Colosseum is in Rome"
    result = explorer.wait(120)
    assert session.engine_requests - before == 1
    tokens = list(result.tokens.texts)
    assert explorer.tree.prompt_tokens == tokens
    assert explorer.attention.result is result and explorer.lens.result is result
    heatmap = explorer.attention.figure.data[0]
    np.testing.assert_allclose(heatmap_matrix(heatmap), result.patterns[0][0])
    lens = explorer.lens.figure.data[0]
    np.testing.assert_allclose(heatmap_matrix(lens), result.lens.top1_probs())


def test_attention_view_shows_the_engines_pattern(session, explorer):
    expected = reference_attention(str(checkpoint("qwen2")), "qwen2", PROMPT)
    view = explorer.attention
    before = session.engine_requests
    view.layer, view.head = 1, 2
    view.wait(120)
    assert session.engine_requests - before == 1  # a layer switch: one request
    z = heatmap_matrix(view.figure.data[0])
    np.testing.assert_allclose(z, expected[("attention_probabilities", 1)][0, 2].cpu().numpy(), atol=1 / 255)
    view.head = 0  # a head switch: none
    view.layer = 0  # back to the prompt's layer: none
    view.layer = 1  # and to layer 1 again: cached
    view.wait(120)
    assert session.engine_requests - before == 1
    view.layer = 9  # out of range: refused with a message, the view stays
    assert view.layer == 1 and "9" in view.message.value
    np.testing.assert_allclose(
        heatmap_matrix(view.figure.data[0]), expected[("attention_probabilities", 1)][0, 0].cpu().numpy(), atol=1 / 255
    )


def test_a_new_prompt_keeps_the_layer_in_one_request(session, explorer):
    explorer.attention.layer = 1
    explorer.attention.wait(120)
    before = session.engine_requests
    explorer.prompt_box.value = "The Colosseum is in Rome"
    result = explorer.wait(120)
    assert session.engine_requests - before == 1
    assert result.attention.layer == 1 and explorer.attention.panel is result.attention


def test_lens_window_moves_by_buttons_and_slider(session, explorer):
    long_prompt = " ".join(["The Eiffel Tower is in Paris"] * 7)
    explorer.prompt_box.value = long_prompt
    result = explorer.wait(120)
    lens = explorer.lens
    count = len(result.tokens)
    assert count > 32 and (lens.panel.start, lens.panel.stop) == (count - 32, count)  # the last positions
    assert lens.controls.layout.display != "none" and lens.window.count == count
    before = session.engine_requests
    lens.shift(-1)  # the ◀ button
    panel = lens.wait(120)
    assert (panel.start, panel.stop) == (0, 32) and tuple(lens.window.value) == (0, 32)
    assert session.engine_requests - before == 1
    expected = session.lens(long_prompt, 0, 32).result(5)  # cached: the same panel
    assert expected is panel and session.engine_requests - before == 1
    np.testing.assert_allclose(heatmap_matrix(lens.figure.data[0]), panel.top1_probs())
    lens.window.value = (3, 9)  # the window control (the browser tests drive it by mouse and keyboard)
    assert (lens.wait(120).start, lens.panel.stop) == (3, 9)
    lens.figure.data[0]._dispatch_on_click(_click(x=5), None)
    assert explorer.selected_token == 5


def test_lens_last_row_is_the_models_prediction(explorer):
    result = explorer.result
    last = result.lens.num_layers - 1
    hover = lens_hover(result.lens, last, len(result.tokens) - 1)
    tokenizer = explorer.session.tokenizer()
    assert [text for text, _ in hover] == [tokenizer.decode([int(i)]) for i in result.lens.model_top_ids]
    np.testing.assert_allclose([p for _, p in hover], result.lens.model_top_probs, atol=1e-6)


def test_selecting_a_token_selects_it_everywhere(explorer):
    explorer.tree.selected_token = 3  # as a click on a chip does
    assert explorer.attention.selected_token == 3
    assert explorer.lens.selected_token == 3
    explorer.lens.selected_token = 1
    assert explorer.tree.selected_token == 1 == explorer.selected_token


def test_tree_preview_is_the_engines_value(session, explorer):
    result = explorer.result
    value_id = "model.model.layers.1.layer_output"
    expected = reference_values(str(checkpoint("qwen2")), "qwen2", PROMPT)[("layer_output", 1)]
    before = session.engine_requests
    explorer.tree.selected = value_id
    summary = explorer.tree.wait(120)
    assert session.engine_requests - before == 1  # a click: one request
    preview = explorer.tree.preview
    assert preview["shape"] == list(expected.shape) == list(summary.shape)
    data = np.frombuffer(explorer.tree.preview_data, dtype="<f4").reshape(len(preview["rows"]), preview["cols"])
    np.testing.assert_allclose(data, expected[0, :, : preview["cols"]].cpu().numpy(), atol=1e-4)
    assert preview["rows"] == list(result.tokens.texts)
    explorer.tree.selected = ""
    explorer.tree.selected = value_id  # again: cached
    assert explorer.tree.wait(120) is summary and session.engine_requests - before == 1


def test_a_standalone_tree_shows_its_prompt_and_the_value_selected_meanwhile(session):
    """A tree with its own prompt: a value selected while the prompt is on its way is
    previewed for that prompt once it lands (the selection does not replace the prompt)."""
    tree = ModuleTree(session, prompt="The Colosseum is in the city of", key="standalone-tree")
    try:
        tree.selected = "model.model.layers.1.layer_output"  # before the prompt's answer
        summary = tree.wait(120)
        assert tree.result is not None and tree.result.prompt == "The Colosseum is in the city of"
        assert summary is not None and summary.id == "model.model.layers.1.layer_output"
        assert tree.preview["rows"] == list(tree.result.tokens.texts)
        assert tree.status["state"] == "idle"
    finally:
        tree.close()


def test_tree_shapes_need_no_request(session, explorer):
    count = len(explorer.result.tokens)
    values = {}

    def walk(node):
        values.update({value["id"]: value for value in node["values"]})
        for child in node["children"]:
            walk(child)

    walk(explorer.tree.tree[0])
    assert values["model.model.layers.1.mlp.mlp_neurons"]["shape"] == [1, count, 256]
    assert values["model.model.layers.0.self_attn.attention_scores"]["shape"] == [1, 4, count, count]


def test_bad_input_shows_in_the_widget_and_the_engine_keeps_serving(session, explorer):
    explorer.prompt_box.value = ""
    with pytest.raises(Exception, match="empty"):
        explorer.wait(60)
    assert "empty" in explorer.status_line.text
    assert explorer.tree.status["state"] == "error"
    explorer.prompt_box.value = "Paris " * 80
    with pytest.raises(Exception, match="max_model_len"):
        explorer.wait(60)
    assert "max_model_len" in explorer.status_line.text
    explorer.prompt_box.value = PROMPT
    assert explorer.wait(120).tokens.texts[0] == "The"
    assert explorer.tree.status["state"] == "idle"
    assert explorer.attention.status["state"] == "idle"


def test_markup_in_a_prompt_stays_text(explorer):
    explorer.prompt_box.value = MARKUP
    result = explorer.wait(120)
    assert "".join(explorer.tree.prompt_tokens) == MARKUP  # raw text: the JS sets textContent
    for figure in (explorer.attention.figure, explorer.attention.grid, explorer.lens.figure):
        assert "<img" not in figure.to_json()
    assert "<img" not in json.dumps(explorer.tree.tree)
    assert any("<" in text for text in result.tokens.texts)


def test_standalone_panels_share_the_session(session):
    opens = session.engine_opens
    tree = ModuleTree(session, prompt=PROMPT)
    lens = LogitLens()
    view = AttentionView()
    result = session.prompt(PROMPT, key="standalone").result(120)
    lens.update(result)
    view.update(result)
    assert session.engine_opens == opens
    assert lens.figure.data and view.figure.data
    assert tree.session is session


def test_toggling_a_head_reruns_ablated_and_shows_the_delta(session, explorer):
    view = explorer.attention
    clean = explorer.result
    assert clean.ablate == ()
    view.ablate_mode.value = True
    before = session.engine_requests
    view.grid.data[1]._dispatch_on_click(_click(x=0), None)  # layer 0, head 1
    assert view.ablated == ((0, 1),) and view.head == 0  # toggled, not shown
    ablated = explorer.wait(120)
    assert ablated.ablate == ((0, 1),)
    delta = explorer.wait_ablation(120)
    assert session.engine_requests - before == 1  # the ablated run and the clean one: one trace
    expected = session.ablation(PROMPT, [(0, 1)]).result(120)
    assert delta.ids[0] == clean.lens.model_top_ids[0] == expected.ids[0]
    np.testing.assert_allclose(delta.top1_delta, expected.top1_delta, atol=1e-6)
    assert f"{expected.top1_delta:+.4f}" in explorer.ablation_line.text
    assert "L0H1" in view.ablated_label.value
    view.grid.data[1]._dispatch_on_click(_click(x=0), None)  # toggled off: the clean run again
    assert explorer.wait(120).ablate == () and explorer.ablation_line.text == ""
    np.testing.assert_allclose(explorer.result.lens.model_top_probs, clean.lens.model_top_probs, atol=1e-6)


def test_generate_shows_each_step_and_the_slider_moves_the_outline(session, explorer):
    gen = explorer.generation
    assert gen.figure_box.children == ()  # no bare axes before a generation
    gen.tokens_input.value = 3
    gen.generate_button.click()
    result = gen.wait(180)
    assert gen.figure_box.children == (gen.figure,)
    assert len(result.steps) == 3 and gen.step_slider.max == 2
    assert heatmap_matrix(gen.figure.data[0]).shape[1] == 3

    def outlined():
        return {(s.x0 + s.x1) / 2 for s in gen.figure.layout.shapes if s.name == "step"}

    assert outlined() == {0}
    gen.step_slider.value = 2
    assert outlined() == {2}
    assert "prefill" in gen.note.value


def test_bad_max_tokens_shows_the_error_then_the_next_request_succeeds(session, explorer):
    gen = explorer.generation
    for bad in (0, -2, 10_000):
        gen.generate(bad)
        with pytest.raises(GenerationError):
            gen.wait(120)
        assert "max_tokens" in gen.message.value or "max_model_len" in gen.message.value
    gen.generate(2)
    assert len(gen.wait(180).steps) == 2 and not gen.message.value.startswith("⚠")


def test_a_long_prompt_shows_the_pooled_pattern_zooms_and_comes_back(session, monkeypatch):
    from plotly.callbacks import Points

    from nnterp_widgets.widgets import attention as attention_module

    from nnterp_widgets.figures.attention import block_label
    from nnterp_widgets.figures.common import escape_token

    def click(trace, row, col):
        trace._dispatch_on_click(Points(point_inds=[0], xs=[col], ys=[row], trace_name="t", trace_index=0), None)

    prompt = "The Eiffel Tower is in Paris and the Colosseum is in Rome"
    kept = session.pattern_side
    session.pattern_side = 4  # 12 tokens: pooled in blocks of 3
    view = Explorer(session, prompt=prompt)
    try:
        view.wait(120)
        att = view.attention
        panel = att.panel
        assert panel.block == 3 and att.zoomed is None and att.zoom_out_button.disabled
        heatmap = att.figure.data[0]
        np.testing.assert_array_equal(heatmap_matrix(heatmap), panel.head(0))
        assert "max over queries %{y}" in heatmap.hovertemplate
        assert list(att.figure.layout.yaxis.ticktext) == [block_label(panel, *span) for span in panel.query_ranges()]
        # A click on a pooled cell: the exact window around it, one request.
        before = session.engine_requests
        click(att.figure.data[0], 1, 2)
        att.wait(120)
        assert session.engine_requests - before == 1
        zoomed = att.zoomed
        q0, k0 = panel.zoom_origin(1, 2, 4)
        assert zoomed.exact and (zoomed.query_start, zoomed.key_start) == (q0, k0)
        exact = reference_attention(str(checkpoint("qwen2")), "qwen2", prompt)[("attention_probabilities", 0)]
        want = exact[0, :, q0 : q0 + 4, k0 : k0 + 4].cpu().numpy()

        def want_at(q, k, side):  # the shown head's exact cells of a window
            return exact[0, att.head, q : q + side, k : k + side].cpu().numpy()

        np.testing.assert_allclose(heatmap_matrix(att.figure.data[0]), want[0], atol=1 / 255)
        texts = zoomed.tokens.texts
        assert list(att.figure.layout.yaxis.ticktext) == [escape_token(t) for t in texts[q0 : q0 + 4]]
        assert list(att.figure.layout.xaxis.ticktext) == [escape_token(t) for t in texts[k0 : k0 + 4]]
        assert not att.zoom_out_button.disabled
        att.head = 2  # a head switch inside the window: no request
        np.testing.assert_allclose(heatmap_matrix(att.figure.data[0]), want[2], atol=1 / 255)
        assert f"queries {q0}..{q0 + 3}, keys {k0}..{k0 + 3} (exact)" in view.to_html()  # the page shows the zoom
        click(att.figure.data[0], q0 + 1, k0)  # a click on an exact cell selects its query
        assert att.selected_token == q0 + 1 and view.lens.selected_token == q0 + 1
        assert att.wait_token_view(120).query_start == q0 + 1  # the token view's row: one request
        assert session.engine_requests - before == 2
        # Zoom out: the pooled pattern again, no request; zooming back in is cached.
        att.zoom_out_button.click()
        assert att.zoomed is None and att.zoom_out_button.disabled
        np.testing.assert_array_equal(heatmap_matrix(att.figure.data[0]), panel.head(2))
        click(att.figure.data[0], 1, 2)
        att.wait(120)
        assert att.zoomed is zoomed and session.engine_requests - before == 2
        # A zoom is ZOOM_SIDE tokens a side where the pattern side is larger.
        monkeypatch.setattr(attention_module, "ZOOM_SIDE", 2)
        att.zoom_out_button.click()
        click(att.figure.data[0], 3, 3)
        att.wait(120)
        q0, k0 = panel.zoom_origin(3, 3, 2)
        assert (att.zoomed.query_start, att.zoomed.key_start) == (q0, k0)
        np.testing.assert_allclose(heatmap_matrix(att.figure.data[0]), want_at(q0, k0, 2), atol=1 / 255)
    finally:
        session.pattern_side = kept
        view.close()


# -- the patching panel (issue 17) ---------------------------------------------------------

CLEAN, CORRUPTED, ANSWER, FOIL = "The Eiffel Tower is in", "The Colosseum Tower is in", " Paris", " Rome"


def _patch_inputs(panel, clean=CLEAN, corrupted=CORRUPTED, answer=ANSWER, foil=FOIL, site="layer_output"):
    panel.clean_box.value, panel.corrupted_box.value = clean, corrupted
    panel.answer_box.value, panel.foil_box.value = answer, foil
    panel.site_picker.value = site


def test_patch_panel_draws_the_sessions_sweep_and_pair(session):
    panel = PatchPanel(session, key="patch-panel")
    _patch_inputs(panel)
    assert panel.maps.children == ()  # no bare axes before a sweep
    before = session.engine_requests
    panel.run_button.click()
    result = panel.wait(300)
    assert panel.maps.children == (panel.figure, panel.pair_figure)
    # The panel's data is the session's: the same sweep asked directly, and the pair's lens.
    expected = session.patch(CLEAN, CORRUPTED, ANSWER, FOIL, key="direct").result(300)
    pair = session.compare(CLEAN, CORRUPTED, ANSWER, FOIL, key="direct-compare").result(120)
    assert session.engine_requests - before == 4  # the sweep and the compare, by the panel then directly
    devices.assert_same_run(result.patched, expected.patched)
    devices.assert_same_run(panel.pair.difference, pair.difference)
    heat = panel.figure.data[0]
    np.testing.assert_array_equal(heatmap_matrix(heat), result.effect.astype(np.float32))
    cells = heatmap_matrix(heat, "customdata")
    assert cells[1, 2][1] == escape_token(result.clean.texts[2])
    assert list(cells[1, 2][2:]) == [float(result.patched[1, 2]), result.clean_metric, result.corrupted_metric]
    assert list(panel.figure.layout.xaxis.ticktext) == [escape_token(t) for t in result.clean.texts]
    np.testing.assert_array_equal(heatmap_matrix(panel.pair_figure.data[0]), panel.pair.difference)  # its own run
    assert f"{result.requests} engine requests" in panel.status_label.value
    # A new site is one more sweep; the pair's lens is the one shown.
    panel.site_picker.value = "attention_head_outputs"
    before = session.engine_requests
    panel.run()
    heads = panel.wait(300)
    assert heads.per_head and heads.effect.shape == (2, 4)
    assert session.engine_requests - before == 1
    assert list(panel.figure.layout.xaxis.ticktext) == [f"head {h}" for h in range(4)]
    panel.close()


def test_patch_panel_selection_is_the_explorers(session, explorer):
    panel = explorer.patching
    _patch_inputs(panel)
    panel.run()
    panel.wait(300)

    def outlined(figure):
        return {(s.x0 + s.x1) / 2 for s in figure.layout.shapes}

    panel.figure.data[0]._dispatch_on_click(_click(x=2), None)  # a position column
    assert explorer.selected_token == 2 == explorer.attention.selected_token == explorer.lens.selected_token
    assert outlined(panel.figure) == outlined(panel.pair_figure) == {2}
    explorer.selected_token = 4  # selected elsewhere: the column is outlined here
    assert outlined(panel.figure) == {4}
    explorer.selected_token = -1
    assert outlined(panel.figure) == set()
    # The export carries the sweep and the pair, their numbers exactly.
    page = explorer.to_html()
    figures = _figures(page)
    assert {"nnw-patch", "nnw-pair"} <= set(figures)
    np.testing.assert_array_equal(_decode(figures["nnw-patch"]["data"][0]["z"]), panel.result.effect.astype(np.float32))
    assert not any("src=" in tag.lower() for tag in re.findall(r"<script\b[^>]*>", page, re.I))  # offline


BAD_PATCHES = [
    (dict(corrupted="The Louvre Museum is in"), "the clean prompt is 5 tokens and the corrupted prompt 7 tokens"),
    (dict(answer=" Parisian Rome"), "the answer ' Parisian Rome' is"),
    (dict(foil=" Rome Paris"), "the foil ' Rome Paris' is"),
    (dict(foil=ANSWER), "the answer and the foil are the same token"),
]


def test_bad_patch_input_shows_in_the_status_line_then_a_sweep_succeeds(session):
    panel = PatchPanel(session, key="bad-patch")
    for changes, message in BAD_PATCHES:
        _patch_inputs(panel, **changes)
        panel.run()
        with pytest.raises(InterventionError):
            panel.wait(120)
        assert panel.status["state"] == "error" and message in panel.status_label.value
        assert panel.result is None
    _patch_inputs(panel)
    panel.run()
    assert panel.wait(300).effect.shape == (2, 5)
    assert panel.status["state"] == "idle" and panel.figure.data


@pytest.mark.parametrize(
    "pair, message",
    [((0, 9), "head 9 is out of range: each layer has heads 0..3"), ((7, 0), "layer 7 is out of range")],
)
def test_ablating_a_head_out_of_range_shows_the_error_then_the_next_request_succeeds(session, explorer, pair, message):
    view = explorer.attention
    view.toggle_ablation(pair[1], layer=pair[0])
    with pytest.raises(InterventionError):
        explorer.wait(120)
    assert message in explorer.status_line.text
    assert explorer.wait_ablation(120) is None and message in explorer.ablation_line.text
    view.ablated = ((0, 1),)
    assert explorer.wait(120).ablate == ((0, 1),)
    assert explorer.wait_ablation(120).heads == ((0, 1),)
    assert not explorer.status_line.text.startswith("⚠")


# -- generation in the explorer: follow a token, lens modes, the step's availability --------


def _cell(x, y):
    from plotly.callbacks import Points

    return Points(point_inds=[0], xs=[x], ys=[y], trace_name="t", trace_index=0)


def _followed_target(session) -> tuple[int, str]:
    """A token that is exactly one token when typed: the prompt's last."""
    tokenizer = session.tokenizer()
    target = tokenizer(PROMPT)["input_ids"][-1]
    text = tokenizer.decode([target])
    assert tokenizer.encode(text, add_special_tokens=False) == [target]
    return target, text


def test_following_a_typed_token_switches_both_lenses_to_its_modes(session, explorer):
    from test_generation import _assert_ranks, _entropy, _hf_lens

    target, text = _followed_target(session)
    follow, gen = explorer.follow, explorer.generation
    gen.tokens_input.value = 3
    gen.generate_button.click()
    gen.wait(180)
    before = session.engine_requests
    follow.mode_picker.value = "probability"
    follow.target_box.value = text  # typed
    modes = follow.wait(180)
    result = gen.wait(180)  # asked again, following the target
    assert session.engine_requests - before == 2  # one follow, one generation
    assert modes.target.id == target and result.modes.target.id == target
    lens = _hf_lens(str(checkpoint("qwen2")), "qwen2", list(explorer.result.tokens.ids))
    shown = heatmap_matrix(explorer.lens.figure.data[0])
    np.testing.assert_allclose(shown, lens[..., target].numpy(), atol=1e-5)  # the prompt's lens, every position
    np.testing.assert_allclose(heatmap_matrix(gen.figure.data[0]), result.modes.probability)
    assert "probability" in explorer.lens.figure.layout.title.text
    follow.mode_picker.value = "rank"
    follow.wait(180)
    _assert_ranks(explorer.lens.modes.rank, lens, target)
    np.testing.assert_allclose(
        heatmap_matrix(explorer.lens.figure.data[0]), np.log10(explorer.lens.modes.rank), rtol=1e-6
    )
    np.testing.assert_allclose(heatmap_matrix(gen.figure.data[0]), np.log10(result.modes.rank), rtol=1e-6)
    follow.mode_picker.value = "entropy"
    follow.wait(180)
    np.testing.assert_allclose(heatmap_matrix(explorer.lens.figure.data[0]), _entropy(lens).numpy(), atol=1e-4)
    gen.step_slider.value = 2
    assert {(s.x0 + s.x1) / 2 for s in gen.figure.layout.shapes if s.name == "step"} == {2}
    follow.mode_picker.value = "top-1"  # back to the window of the prompt's lens
    np.testing.assert_allclose(heatmap_matrix(explorer.lens.figure.data[0]), explorer.result.lens.top1_probs())


def test_a_target_of_several_tokens_is_refused_then_the_next_is_followed(session, explorer):
    follow = explorer.follow
    tokenizer = session.tokenizer()
    several = " Eiffel Tower is"
    assert len(tokenizer.encode(several, add_special_tokens=False)) > 1
    follow.mode_picker.value = "probability"
    follow.target_box.value = several
    with pytest.raises(Exception, match="not one"):
        follow.wait(180)
    assert follow.message.value.startswith("⚠") and "not one" in follow.message.value
    assert explorer.lens.modes is None  # back to the top-1
    target, text = _followed_target(session)
    follow.target_box.value = text
    assert follow.wait(180).target.id == target and not follow.message.value.startswith("⚠")
    assert explorer.lens.modes.target.id == target


def test_a_click_on_a_lens_cell_picks_its_top1_to_follow(session, explorer):
    follow, lens = explorer.follow, explorer.lens
    selected = explorer.selected_token
    follow.pick_toggle.value = True
    lens.figure.data[0]._dispatch_on_click(_cell(x=2, y=1), None)
    want = int(explorer.result.lens.top_ids[1, 2 - explorer.result.lens.start, 0])
    modes = follow.wait(180)
    assert modes.target.id == want and follow.mode == "probability"
    assert explorer.selected_token == selected  # a pick selects nothing
    expected = session.follow(PROMPT, want).result(180)
    np.testing.assert_allclose(heatmap_matrix(lens.figure.data[0]), expected.probability)
    gen = explorer.generation
    gen.generate(2)
    first = gen.wait(180)  # follows the picked target
    assert first.modes.target.id == want
    gen.figure.data[0]._dispatch_on_click(_cell(x=1, y=0), None)  # a generation cell: step 1, layer 0
    again = int(first.modes.top_ids[0, 1])
    assert follow.wait(180).target.id == again and gen.wait(180).modes.target.id == again
    follow.pick_toggle.value = False
    lens.figure.data[0]._dispatch_on_click(_cell(x=1, y=0), None)
    assert explorer.selected_token == 1 and follow.wait(5).target.id == again
    gen.figure.data[0]._dispatch_on_click(_cell(x=1, y=0), None)  # without pick: shows that step
    assert gen.step == 1


def test_the_tree_greys_the_pattern_on_decode_steps_with_the_engines_reason(session, explorer):
    from seed_text import SEED_DECODE

    gen = explorer.generation
    gen.generate(3)
    result = gen.wait(180)

    def pattern():
        for node in _nodes(explorer.tree.tree[0]):
            for value in node["values"]:
                if value["id"].endswith("layers.0.self_attn.attention_probabilities"):
                    return value
        raise AssertionError("no attention_probabilities in the tree")

    assert gen.step == 0 and pattern()["available"] and pattern()["reason"] is None
    before = session.engine_requests
    stream = next(
        v for node in _nodes(explorer.tree.tree[0]) for v in node["values"] if v["id"].endswith("layers.0.layer_output")
    )
    assert stream["shape"][1] == len(explorer.result.tokens)  # the prompt's tokens on the prefill
    gen.step_slider.value = 1
    assert pattern()["available"] is False and pattern()["reason"] == SEED_DECODE
    stream = next(
        v for node in _nodes(explorer.tree.tree[0]) for v in node["values"] if v["id"].endswith("layers.0.layer_output")
    )
    assert stream["shape"][1] == 1  # a decode step's one token
    assert result.steps[1].availability["self_attn.attention_probabilities"] == SEED_DECODE
    note = explorer.attention.step_note
    assert "prefill (step 0)" in note.value and "not of step 1" in note.value and note.layout.display is None
    assert "decode" in gen.step_slider.caption
    gen.step_slider.value = 0
    assert pattern()["available"] and pattern()["reason"] is None
    assert note.value == "the pattern of the prefill (step 0)" and note.layout.display == "none"
    assert session.engine_requests == before  # stepping asks nothing
    page = explorer.to_html()
    assert html.escape(SEED_DECODE) in page and "<h2>Generation</h2>" in page
    assert 'data-step="2"' in page and "<script src" not in page
    for text in result.generated.texts:
        assert html.escape(show_token(text)) in page


def _nodes(node):
    yield node
    for child in node["children"]:
        yield from _nodes(child)


def test_attribution_panel_draws_the_sessions_attribution_and_links_the_head(session, explorer):
    panel = explorer.attribution
    assert panel.figure not in panel.children  # no bare axes before an attribution
    panel.answer_box.value, panel.foil_box.value = " Paris", " Rome"
    before = session.engine_requests
    panel.run_button.click()
    shown = panel.wait(120)
    assert session.engine_requests - before == 1
    direct = session.attribute(PROMPT, " Paris", " Rome", key="direct-attribute").result(120)
    devices.assert_same_run(shown.heads, direct.heads)
    assert panel.figure in panel.children
    np.testing.assert_allclose(heatmap_matrix(panel.figure.data[0]), shown.heads.astype(np.float32), rtol=1e-6)
    np.testing.assert_allclose(heatmap_matrix(panel.figure.data[1])[:, 0], shown.mlps.astype(np.float32), rtol=1e-6)
    assert "logit(' Paris')" in panel.status_label.value
    # "Largest" is by size, and its sign is said: the head of largest |effect|, toward or against.
    (layer, head), effect = shown.top_heads(1)[0]
    assert abs(effect) == np.abs(shown.heads).max()
    said = f"layers[{layer}] head {head}, {effect:+.3f} ({'toward' if effect > 0 else 'against'} the answer)"
    assert "largest effect (by size)" in panel.status_label.value and said in panel.status_label.value
    # A click on a head selects it, outlines it, and the attention view shows it.
    from plotly.callbacks import Points

    panel._on_click(panel.figure.data[0], Points(point_inds=[0], xs=[2], ys=[1], trace_name="t", trace_index=0))
    assert panel.selected_head == (1, 2)
    assert (explorer.attention.layer, explorer.attention.head) == (1, 2)
    assert [s["name"] for s in panel.figure.layout.shapes] == ["selected head"]
    page = explorer.to_html()
    assert "Who wrote the answer" in page and "nnw-attribution" in page


def test_attribution_panel_shows_a_refusal_then_serves_the_next(session, explorer):
    panel = explorer.attribution
    panel.answer_box.value = " Paris is"  # two tokens
    panel.run()
    with pytest.raises(InterventionError):
        panel.wait(60)
    assert panel.status["state"] == "error" and "exactly one token" in panel.status["message"]
    panel.answer_box.value = " Paris"
    panel.run()
    assert panel.wait(120) is not None and panel.status["state"] == "idle"


def test_contribution_panel_draws_the_graph_and_redraws_at_a_threshold_without_asking(session, explorer):
    from plotly.callbacks import Points

    from nnterp_widgets.figures.contributions import route_picture

    panel = explorer.contributions
    assert panel.figure not in panel.children  # no bare axes before a graph
    before = session.engine_requests
    panel.run_button.click()
    shown = panel.wait(120)
    assert session.engine_requests - before == 1
    direct = session.contributions(PROMPT, key="direct-contributions").result(120)
    devices.assert_same_run(shown.residual, direct.residual)
    nodes = panel.figure.data[-1]
    route = shown.graph(panel.threshold.value)
    columns = route_picture(shown, panel.threshold.value).columns  # positions off the routes folded
    assert list(zip(nodes.x, nodes.y, strict=True)) == [(columns[p], l) for l, p in route.nodes]
    assert sorted(set(nodes.x)) == sorted({columns[p] for _, p in route.nodes})
    # The slider keeps fewer edges, from the answer held: no new request.
    asked = session.engine_requests
    wide = len(panel.figure.data[-2].hovertext) if len(panel.figure.data) > 1 else 0
    panel.threshold.value = 0.3
    narrow = len(panel.figure.data[-2].hovertext) if len(panel.figure.data) > 1 else 0
    assert narrow == len(shown.graph(0.3).edges) <= wide
    assert session.engine_requests == asked
    # A click on a node selects its token (not its column), in the explorer too.
    last = len(shown.graph(0.3).nodes) - 1
    panel._on_click(nodes, Points(point_inds=[last], xs=[0], ys=[0], trace_name="node", trace_index=0))
    assert explorer.selected_token == shown.graph(0.3).nodes[last][1]
    page = explorer.to_html()
    assert "Through which tokens" in page and "nnw-contributions" in page


def test_occlusion_panel_shades_the_prompt_and_selects_a_token(session, explorer):
    panel = explorer.occlusion
    assert panel.text_view not in panel.children
    panel.answer_box.value = " Paris"
    panel.run_button.click()
    shown = panel.wait(120)
    direct = session.occlude(PROMPT, " Paris", key="direct-occlude").result(120)
    devices.assert_same_run(shown.logits, direct.logits)
    view = panel.text_view
    assert view in panel.children
    np.testing.assert_allclose(view.shown_values, shown.delta_logit.astype(np.float32), rtol=1e-6)
    assert view.tokens == [show_token(t) for t in shown.tokens.texts]
    strongest = np.abs(shown.delta_logit)
    assert strongest[view.strongest[0]] == strongest.max()  # the strongest listed first
    view.selected = 2  # a click in the browser
    assert explorer.selected_token == 2
    panel.measure_picker.value = "probability"
    np.testing.assert_allclose(view.shown_values, shown.delta_prob.astype(np.float32), rtol=1e-6)
    panel.answer_box.value = " Paris is"
    panel.run()
    with pytest.raises(InterventionError):
        panel.wait(60)
    assert panel.status["state"] == "error"
    panel.answer_box.value = " Paris"
    panel.run()
    assert panel.wait(120) is not None and panel.status["state"] == "idle"


def test_steer_panel_shows_both_continuations_aligned_and_a_refusal(session, explorer):
    from nnterp_widgets.figures.causal import DIFFERS

    panel = explorer.steering
    panel.layer_input.value, panel.coefficient_slider.value, panel.tokens_input.value = 1, 8.0, 5
    panel.run_button.click()
    result = panel.wait(120)
    assert len(result.steered.generated) == len(result.plain.generated) == 5
    page = panel.output.value
    for text in result.plain.generated.texts:
        assert html.escape(show_token(text)) in page
    assert (DIFFERS in page) == (result.divergence is not None)
    before = session.engine_requests
    panel.layer_input.text.value = "7"  # out of range for the tiny model's 2 layers: refused in place
    panel.run()
    assert "⚠ layer 7 is out of range: type a whole number from 0 to 1" in panel.message.value
    assert session.engine_requests == before  # nothing asked
    panel.layer_input.text.value = "1"
    panel.run()
    assert panel.wait(120) is not None and "differ" in panel.message.value


def test_the_generation_figure_follows_the_page_theme(session, explorer):
    """The tree reports the page's theme; the generation view's figure takes it too (it is
    no plot panel of its own), and keeps it through a new step and a new generation."""
    import plotly.io as pio

    dark = pio.templates["plotly_dark"].layout.paper_bgcolor
    view = explorer.generation
    try:
        explorer.tree.theme = "dark"
        view.generate(2)
        view.wait(120)
        assert view.figure.layout.template.layout.paper_bgcolor == dark
        view.step_slider.value = 1
        view.show_mode("entropy")  # other traces: the figure's layout is replaced
        assert view.figure.layout.template.layout.paper_bgcolor == dark
        explorer.tree.theme = "light"
        assert view.figure.layout.template.layout.paper_bgcolor != dark
    finally:
        explorer.tree.theme = "light"
        view.show_mode("top-1")


def test_a_branch_from_the_generation_view_is_shown_beside_the_original(session, explorer):
    view = explorer.generation
    view.generate(4)
    view.wait(120)
    view.step_slider.value = 1
    assert not view.branch_button.disabled and view.branch_picker.options
    label, token = view.branch_picker.options[0]
    assert token != view.result.steps[1].token
    view.branch_picker.value = token
    view.branch_button.click()
    view.wait(120, line=BRANCH)
    result = view.branch_result
    assert result is not None and result.step == 1 and result.forced == token
    assert html.escape(show_token(result.forced_text)) in view.branch_output.value
    page = explorer.to_html()
    assert "<h2>Branch</h2>" in page


def test_attention_and_lens_wait_inside_a_notebook_cell(session):
    """In a cell the kernel's loop, which would show an answer, is blocked by the cell
    itself: `wait` shows the answer there (it used to wait out its whole timeout)."""
    import asyncio

    text = "The Colosseum is in the city of Rome"
    result = session.prompt(text, key="cell").result(120)  # its layer 1 and its windows are not cached

    async def cell():
        view = AttentionView(session=session, key="cell")  # built on the loop: answers go to it
        lens = LogitLens(session=session, key="cell")
        view.update(result)
        lens.update(result)
        view.layer = 1
        panel = view.wait(60)
        lens.window.value = (0, 2)
        window = lens.wait(60)
        view.close()
        lens.close()
        return panel, window

    panel, window = asyncio.run(asyncio.wait_for(cell(), 180))
    assert panel.layer == 1 and list(panel.tokens.texts) == list(result.tokens.texts)
    assert (window.start, window.stop) == (0, 2)


def test_a_new_prompt_dims_what_shows_the_old_one_until_its_answer(session, explorer):
    from nnterp_widgets.widgets.lifecycle import STALE

    explorer.attribution.run()
    explorer.attribution.wait(120)
    assert STALE not in explorer.attribution._dom_classes
    other = "The Colosseum is in"
    explorer.prompt_box.value = other
    # At once, before the answer: the main panels and the attribution dim, and it says why.
    assert all(STALE in panel._dom_classes for panel in explorer._dimmed())
    assert STALE in explorer.attribution._dom_classes
    assert repr(PROMPT) in explorer.attribution.message.value
    explorer.wait(120)
    assert not any(STALE in panel._dom_classes for panel in explorer._dimmed())
    assert STALE in explorer.attribution._dom_classes  # its own answer is still the old prompt's
    explorer.attribution.run()
    explorer.attribution.wait(120)
    assert STALE not in explorer.attribution._dom_classes and explorer.attribution.message.value == ""
    explorer.prompt_box.value = PROMPT
    assert STALE in explorer.attribution._dom_classes and repr(other) in explorer.attribution.message.value
    assert STALE not in explorer.occlusion._dom_classes  # never ran: nothing shown to dim
    explorer.wait(120)


def test_an_error_is_said_whole_on_the_line_and_in_the_tree_and_cleared_by_the_next_success(session, explorer):
    explorer.prompt_box.value = ""
    with pytest.raises(RequestRefused, match="empty") as refused:
        explorer.wait(60)
    said = [panel for panel in explorer.panels if "empty" in panel.status["message"]]
    assert said == [explorer.tree], said  # the tree says why; the other panels only dim
    assert str(refused.value) in explorer.status_line.text and str(refused.value) in explorer.tree.status["message"]
    assert "white-space: pre-wrap" in explorer.status_line.value  # wrapped, never cut to one line
    assert all(panel.status["state"] == "error" for panel in explorer.panels)
    explorer.prompt_box.value = PROMPT
    explorer.wait(120)
    assert "⚠" not in explorer.status_line.text
    assert all(panel.status["state"] == "idle" for panel in explorer.panels)


def test_the_head_grid_marks_the_shown_and_ablated_heads_and_the_export_says_the_ablation(session, explorer):
    from nnterp_widgets.figures.attention import ABLATED_MARK, SHOWN_MARK

    view = explorer.attention
    view.head = 2
    titles = [a.text for a in view.grid.layout.annotations]
    assert titles[2].startswith(SHOWN_MARK) and sum(t.startswith(SHOWN_MARK) for t in titles) == 1
    assert [s.name for s in view.grid.layout.shapes] == ["shown head"]
    view.ablated = ((view.layer, 1),)
    explorer.wait(120)
    explorer.wait_ablation(120)
    titles = [a.text for a in view.grid.layout.annotations]
    assert titles[1].endswith(ABLATED_MARK) and not titles[0].endswith(ABLATED_MARK)
    page = explorer.to_html()
    assert f"heads ablated in the lens and attention shown: L{view.layer}H1" in page
    assert "clean →" in page
    view.ablated = ()
    explorer.wait(120)
    assert "heads ablated" not in explorer.to_html()


def test_the_token_view_follows_the_selected_token_and_head(session, explorer):
    view = explorer.attention
    text = view.text_view
    explorer.selected_token = 2
    assert text.selected == 2 and text.caption == f"layers[{view.layer}] head {view.head}"
    assert text.state == text_view_state(view.shown, view.head)
    view.head = 1
    assert text.caption.endswith("head 1") and text.state == text_view_state(view.shown, 1)
    text.selected = 1  # a click on a token in the browser
    assert explorer.selected_token == 1 and view.selected_token == 1
    text.selected = 999  # past the prompt: refused, put back
    assert explorer.selected_token == 1 and text.selected == 1
    explorer.selected_token = -1
    assert text.selected == -1


def test_past_the_pattern_side_the_token_view_shows_the_selected_querys_row(session):
    prompt = "The Eiffel Tower is in Paris and the Colosseum is in Rome"
    kept = session.pattern_side
    session.pattern_side = 4  # 12 tokens: the shipped pattern is pooled
    view = Explorer(session, prompt=prompt)
    try:
        view.wait(120)
        att, text = view.attention, view.attention.text_view
        assert not att.panel.exact and text.rows == [] and len(text.tokens) == len(view.result.tokens)
        before = session.engine_requests
        text.selected = 7  # a click on a token in the browser
        att.head = 1  # a redraw while the row is on its way asks nothing more
        row = att.wait_token_view(120)
        assert session.engine_requests - before == 1 and row.query_start == 7
        exact = reference_attention(str(checkpoint("qwen2")), "qwen2", prompt)[("attention_probabilities", 0)]
        assert text.rows == [7] and text.state == text_view_state(att.shown, att.head, row)
        np.testing.assert_allclose(text.state.row(7), exact[0, att.head, 7].cpu().numpy(), atol=1 / 255)
        att.head = 2  # another head: the same row request's weights, no request
        assert text.state.row(7) == pytest.approx(exact[0, 2, 7].cpu().numpy(), abs=1 / 255)
        assert session.engine_requests - before == 1
        assert 'data-local="selected"' in view.to_html() and '"rows": [7]' in view.to_html()  # the export too
        view.selected_token = 3  # another token: its row
        assert att.wait_token_view(120).query_start == 3 and text.rows == [3]
        view.selected_token = -1
        assert text.rows == [] and att.row_panel is None
    finally:
        session.pattern_side = kept
        view.close()


def test_the_tools_are_tabs_under_the_lens(explorer):
    assert explorer.tools.titles == (
        "generation",
        "attribution",
        "contribution graph",
        "occlusion",
        "steering",
        "patching",
    )
    assert explorer.tree in explorer.tree_box.children and explorer.readings in explorer.views.children
    assert [explorer.attention, explorer.lens, explorer.follow] == list(explorer.readings.children)
    asked = explorer.in_view.asked
    explorer.show_tool("patching")
    assert explorer.tools.children[explorer.tools.selected_index] is explorer.patching
    # the opened tool is brought into view (the browser scrolls to the element of that class)
    assert explorer.in_view.asked == asked + 1 and explorer.in_view.target in explorer.tools._dom_classes
    assert explorer.tool_strip.value == "patching"  # the strip shows the tool open
    explorer.tool_strip.value = "occlusion"  # a click on the strip opens it
    assert explorer.tools.children[explorer.tools.selected_index] is explorer.occlusion
    with pytest.raises(ValueError, match="the tabs are generation"):
        explorer.show_tool("lens")
    # a head clicked in the attribution map: the attention view shows it, brought into view
    explorer.attribution.selected_head = (1, 1)
    assert (explorer.attention.layer, explorer.attention.head) == (1, 1)
    assert explorer.in_view.asked == asked + 3 and explorer.in_view.target in explorer.attention._dom_classes
    assert "nnw-explorer" in explorer._dom_classes and explorer.in_view in explorer.children
