"""The session on a real engine: the prompt request paints the explorer (windowed lens,
one layer's quantised pattern, shapes from the description), a layer switch, a lens
window and a value preview are one request each and cached; coalescing, dropped work,
error isolation, the message-size refusal; panel data held to transformers (float32,
eager)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

import devices
from conftest import open_session
from nnterp_widgets.checkpoints import checkpoint
from nnterp_widgets.requests.common import RequestRefused, ResultTooLarge
from nnterp_widgets.session import Superseded
from nnterp_widgets.requests.attention import QUANT
from nnterp_widgets.requests.common import MAX_RESULT_BYTES
from nnterp_widgets.requests.attention import pattern_bytes
from reference import hf_model, reference_attention, reference_values
from traces import trace_values

PROMPT = "The Eiffel Tower is in"
LONGER = "The Eiffel Tower is in Paris and the Colosseum is in Rome"
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


def _assert_lens(lens, expected: torch.Tensor) -> None:
    top = expected[:, lens.start : lens.stop].topk(lens.top_ids.shape[-1], dim=-1)
    np.testing.assert_array_equal(lens.top_ids, top.indices.cpu().numpy())
    np.testing.assert_allclose(lens.top_probs, top.values.cpu().numpy(), atol=1e-5)


def _arrays(obj) -> list:
    """Every array-like field of a panel object (recursively)."""
    found = []
    for value in vars(obj).values():
        if isinstance(value, (np.ndarray, torch.Tensor)):
            found.append(value)
        elif hasattr(value, "__dataclass_fields__"):
            found.extend(_arrays(value))
    return found


def test_open_is_once_per_kernel(session):
    again = open_session("qwen2")
    assert again is session
    assert session.engine_opens == 1


def test_lens_matches_transformers(session, result):
    lens = _hf_lens(str(checkpoint("qwen2")), PROMPT)
    assert (result.lens.start, result.lens.stop) == (0, len(result.tokens))  # shorter than the window
    _assert_lens(result.lens, lens)
    tokenizer = session.tokenizer()
    assert result.lens.top1_texts()[0][0] == tokenizer.decode([int(result.lens.top_ids[0, 0, 0])])


def test_windowed_lens_is_the_reference_at_those_positions(session):
    expected = _hf_lens(str(checkpoint("qwen2")), LONGER)
    narrow = session.prompt(LONGER, window=4).result(timeout=120)
    count = len(narrow.tokens)
    assert (narrow.lens.start, narrow.lens.stop) == (count - 4, count)  # the last positions
    assert narrow.lens.top_ids.shape[:2] == (2, 4)
    _assert_lens(narrow.lens, expected)
    before = session.engine_requests
    moved = session.lens(LONGER, 2, 7).result(timeout=120)
    assert session.engine_requests - before == 1
    assert (moved.start, moved.stop) == (2, 7)
    _assert_lens(moved, expected)
    again = session.lens(LONGER, 2, 7).result(timeout=5)
    assert again is moved and session.engine_requests - before == 1  # cached
    with pytest.raises(RequestRefused, match="outside"):
        session.lens(LONGER, 5, 500).result(timeout=60)


def _vllm_requests(session) -> int:
    return session._engine().vllm_entrypoint.request_counter.counter


def test_a_lens_window_move_on_the_prompt_shown_runs_no_forward(session):
    """The prompt request keeps the streams in the engine's worker; a window move runs the
    lens on them (no vLLM request), and equals transformers; a prompt whose streams weigh
    more than the session keeps moves its window with a forward, as before."""
    if not session._engine().in_process:  # vLLM's own processes (a GPU): nothing is kept
        assert session.prompt(LONGER, window=3).result(timeout=120).kept is None
        pytest.skip("the streams are kept only where vLLM's worker runs in this process")
    expected = _hf_lens(str(checkpoint("qwen2")), LONGER)
    shown = session.prompt(LONGER, window=3).result(timeout=120)
    assert shown.kept is not None
    before = _vllm_requests(session)
    moved = session.lens(LONGER, 1, 6).result(timeout=120)
    assert _vllm_requests(session) == before  # no forward
    _assert_lens(moved, expected)
    np.testing.assert_array_equal(moved.model_top_ids, shown.lens.model_top_ids)
    kept_limit = session.max_kept_bytes
    try:
        session.max_kept_bytes = 1
        other = LONGER + " again"
        assert session.prompt(other, window=3).result(timeout=120).kept is None
        before = _vllm_requests(session)
        session.lens(other, 0, 4).result(timeout=120)
        assert _vllm_requests(session) == before + 1  # a forward
    finally:
        session.max_kept_bytes = kept_limit


def test_last_lens_row_is_the_models_prediction(result):
    np.testing.assert_array_equal(result.lens.top_ids[-1, -1], result.lens.model_top_ids)
    np.testing.assert_allclose(result.lens.top_probs[-1, -1], result.lens.model_top_probs, atol=1e-5)


def test_quantised_patterns_match_transformers(session, result):
    expected = reference_attention(str(checkpoint("qwen2")), "qwen2", PROMPT)
    assert result.pattern_layers == (0, 1)
    assert result.attention.layer == 0  # the first layer unless told otherwise
    before = session.engine_requests
    panels = {0: result.attention, 1: session.attention(PROMPT, 1).result(timeout=120)}
    assert session.engine_requests - before == 1  # layer 0 came with the prompt
    for layer, panel in panels.items():
        want = expected[("attention_probabilities", layer)][0].cpu().numpy()
        assert panel.quantized.dtype == np.uint8 and panel.quantized.shape == want.shape
        np.testing.assert_allclose(panel.pattern, want, atol=1 / QUANT)
        np.testing.assert_array_equal(panel.head(1), panel.pattern[1])
        # A short prompt's thumbnails are its exact probabilities.
        np.testing.assert_allclose(panel.thumbnails, want, atol=1e-5)
        assert len(panel.to_bytes()) == want.size  # one byte a cell
    with pytest.raises(IndexError, match="head 9 is out of range"):
        result.attention.head(9)
    with pytest.raises(RequestRefused, match="no attention pattern for layer 7"):
        session.attention(PROMPT, 7).result(timeout=60)


def test_layer_switch_is_one_request_and_cached(session):
    session.prompt(LONGER, key="switch").result(timeout=120)
    before = session.engine_requests
    first = session.attention(LONGER, 1, key="switch").result(timeout=120)
    assert session.engine_requests - before == 1
    assert session.attention(LONGER, 1, key="switch").result(timeout=5) is first
    assert session.attention(LONGER, 0, key="switch").result(timeout=5).layer == 0  # came with the prompt
    assert session.engine_requests - before == 1


# -- long prompts: the pattern at display resolution, exact cells on demand ----------

#: A side far below the tests' prompts, so the tiny checkpoint's prompts are "long".
SMALL_SIDE = 4


@pytest.fixture()
def small_side(session):
    """The session with `SMALL_SIDE` as its pattern side (restored after)."""
    kept = session.pattern_side
    session.pattern_side = SMALL_SIDE
    yield session
    session.pattern_side = kept


def _max_pool(pattern: np.ndarray, block: int) -> np.ndarray:
    """``[heads, n, n]`` -> block maxima, the last block of a side holding what is left."""
    heads, count, _ = pattern.shape
    cells = -(-count // block)
    padded = np.zeros((heads, cells * block, cells * block), dtype=pattern.dtype)  # probabilities are >= 0
    padded[:, :count, :count] = pattern
    return padded.reshape(heads, cells, block, cells, block).max(axis=(2, 4))


def test_a_short_prompt_ships_every_cell(result):
    panel = result.attention
    assert panel.block == 1 and panel.exact and panel.whole
    assert panel.quantized.shape[1:] == (len(result.tokens),) * 2
    assert panel.query_range(3) == (3, 4) and panel.key_range(0) == (0, 1)


def test_a_long_prompt_ships_the_max_pooled_pattern(small_side):
    session = small_side
    expected = reference_attention(str(checkpoint("qwen2")), "qwen2", LONGER)
    result = session.prompt(LONGER, key="pooled").result(timeout=120)
    count = len(result.tokens)
    block = -(-count // SMALL_SIDE)
    assert block > 1
    before = session.engine_requests
    panels = {0: result.attention, 1: session.attention(LONGER, 1, key="pooled").result(timeout=120)}
    assert session.engine_requests - before == 1  # a layer switch: one request, pooled the same way
    for layer, panel in panels.items():
        exact = expected[("attention_probabilities", layer)][0].cpu().numpy()
        assert panel.block == block and not panel.exact and panel.whole
        assert panel.quantized.shape == (exact.shape[0], SMALL_SIDE, SMALL_SIDE)
        np.testing.assert_allclose(panel.pattern, _max_pool(exact, block), atol=1 / QUANT)
        # The cells' token ranges tile the prompt, the last one holding what is left.
        ranges = panel.query_ranges()
        assert ranges[0] == (0, block) and ranges[-1][1] == count
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
        assert panel.key_ranges() == ranges
        # Thumbnails are as before: the exact pattern, mean-pooled.
        np.testing.assert_allclose(panel.thumbnails, exact, atol=1e-5)
        assert panel.nbytes == pattern_bytes(panel.num_heads, count, SMALL_SIDE)


def test_a_zoom_is_the_exact_window_one_request_cached(small_side):
    session = small_side
    expected = reference_attention(str(checkpoint("qwen2")), "qwen2", LONGER)
    exact = expected[("attention_probabilities", 1)][0].cpu().numpy()
    pooled = session.prompt(LONGER, key="zoom", layer=1).result(timeout=120).attention
    count = len(pooled.tokens)
    origin = pooled.zoom_origin(1, 1, SMALL_SIDE)
    q0, k0 = origin
    first, stop = pooled.query_range(1)
    assert q0 <= first and stop <= q0 + SMALL_SIDE  # the window holds the clicked cell's tokens
    before = session.engine_requests
    window = session.attention(LONGER, 1, key="zoom", window=origin).result(timeout=120)
    assert session.engine_requests - before == 1
    assert session.attention(LONGER, 1, key="zoom", window=origin).result(timeout=5) is window  # cached
    assert session.engine_requests - before == 1
    assert window.exact and not window.whole and (window.query_start, window.key_start) == origin
    np.testing.assert_allclose(window.pattern, exact[:, q0 : q0 + SMALL_SIDE, k0 : k0 + SMALL_SIDE], atol=1 / QUANT)
    assert window.query_range(0) == (q0, q0 + 1) and window.key_cell(k0 + 2) == 2 and window.key_cell(0) is None
    # At the prompt's end the window holds what is left; outside it, a clear refusal.
    edge = session.attention(LONGER, 1, key="zoom", window=(count - 2, 0)).result(timeout=120)
    assert edge.quantized.shape[1:] == (2, SMALL_SIDE)
    np.testing.assert_allclose(edge.pattern, exact[:, count - 2 :, :SMALL_SIDE], atol=1 / QUANT)
    with pytest.raises(RequestRefused, match="outside"):
        session.attention(LONGER, 1, key="zoom", window=(count, 0)).result(timeout=60)
    with pytest.raises(RequestRefused, match="a pattern window is"):
        session.attention(LONGER, 1, key="zoom", window="ab").result(timeout=60)
    assert session.attention(LONGER, 1, key="zoom", window=(0, 0)).result(timeout=120).exact  # still serving
    # A smaller window: its side's exact cells.
    small = session.attention(LONGER, 1, key="zoom", window=origin, side=2).result(timeout=120)
    assert small.quantized.shape[1:] == (2, 2)
    np.testing.assert_allclose(small.pattern, exact[:, q0 : q0 + 2, k0 : k0 + 2], atol=1 / QUANT)
    for bad in (0, SMALL_SIDE + 1, 1.5):
        with pytest.raises(ValueError, match="side must be a whole number"):
            session.attention(LONGER, 1, key="zoom", window=origin, side=bad)
    with pytest.raises(ValueError, match="zoom window's"):
        session.attention(LONGER, 1, key="zoom", side=2)


def test_an_attention_row_is_one_querys_exact_weights_over_every_key(small_side):
    session = small_side
    exact = reference_attention(str(checkpoint("qwen2")), "qwen2", LONGER)[("attention_probabilities", 1)][0]
    count = len(session.tokens(LONGER))
    before = session.engine_requests
    row = session.attention_row(LONGER, 1, count - 3, key="row").result(timeout=120)
    assert session.engine_requests - before == 1
    assert session.attention_row(LONGER, 1, count - 3, key="row").result(timeout=5) is row  # cached
    assert row.exact and row.query_start == count - 3 and row.key_start == 0
    assert row.quantized.shape == (row.num_heads, 1, count) and count > SMALL_SIDE  # past the side: every key
    np.testing.assert_allclose(row.pattern[:, 0], exact[:, count - 3].cpu().numpy(), atol=1 / QUANT)
    with pytest.raises(RequestRefused, match="outside"):
        session.attention_row(LONGER, 1, count, key="row").result(timeout=60)
    assert session.attention_row(LONGER, 1, 0, key="row").result(timeout=120).exact  # still serving


def test_a_pattern_computed_a_few_rows_at_a_time_is_the_same_pattern(small_side, monkeypatch):
    """With the row blocks forced to one pooling block of rows (as at 32,768 tokens, where
    a layer's whole pattern would not fit), the pooled pattern, a zoom, a token's row and
    the thumbnails are transformers' pattern pooled, cut and averaged as before."""
    from nnterp_widgets.engine import probability_rows
    from nnterp_widgets.requests import attention as attention_requests

    session = small_side
    if not session._engine().in_process:
        pytest.skip("the row blocks are set in the worker's module, in this process only on the CPU")
    monkeypatch.setattr(attention_requests, "ROWS_BYTES", 1)
    blocks = []

    def counted(attention, queries, keys, start, stop):
        blocks.append(stop - start)
        return probability_rows(attention, queries, keys, start, stop)

    monkeypatch.setattr(attention_requests, "probability_rows", counted)
    exact = reference_attention(str(checkpoint("qwen2")), "qwen2", LONGER)[("attention_probabilities", 1)][0]
    exact = exact.cpu().numpy()
    count = exact.shape[-1]
    block = -(-count // SMALL_SIDE)

    def ask(engine):
        return (
            attention_requests.run_attention(engine, LONGER, 1, side=SMALL_SIDE),
            attention_requests.run_attention(engine, LONGER, 1, window=(2, 1), side=SMALL_SIDE),
            attention_requests.run_attention_row(engine, LONGER, 1, count - 2),
        )

    pooled, window, row = session.request(ask, key="rows").result(timeout=120)
    assert pooled.block == block > 1
    # Three requests, each a block of rows at a time: a pooling block, then single rows.
    assert blocks == [block] * -(-count // block) + [1] * (2 * count)
    np.testing.assert_allclose(pooled.pattern, _max_pool(exact, block), atol=1 / QUANT)
    np.testing.assert_allclose(pooled.thumbnails, exact, atol=1e-5)
    np.testing.assert_allclose(window.pattern, exact[:, 2 : 2 + SMALL_SIDE, 1 : 1 + SMALL_SIDE], atol=1 / QUANT)
    np.testing.assert_allclose(row.pattern[:, 0], exact[:, count - 2], atol=1 / QUANT)


def test_bytes_grow_at_most_linearly_past_the_side(session):
    kept = session.pattern_side
    session.pattern_side = 8
    try:
        found = {}
        for repeat in (4, 9):  # 24 and 54 tokens: 3x and 6.75x the side
            result = session.prompt(" ".join(["The Eiffel Tower is in Paris"] * repeat), key="linear").result(120)
            panel = result.attention
            assert max(panel.quantized.shape[1:]) <= 8  # the pattern is bounded
            # The thumbnails are too, past THUMBNAIL_SIDE tokens (beyond this engine's 64).
            found[len(result.tokens)] = result.nbytes - panel.thumbnails.nbytes
    finally:
        session.pattern_side = kept
    (short, small), (long, large) = sorted(found.items())
    assert long >= 2 * short
    assert large <= small * long / short


def test_values_are_numpy_on_the_cpu(session, result):
    summary = session.value(PROMPT, "model.model.layers.1.layer_output").result(timeout=120)
    lens = session.lens(PROMPT, 1, 3).result(timeout=120)
    arrays = _arrays(result) + _arrays(summary) + _arrays(lens)
    assert len(arrays) >= 9
    assert all(isinstance(array, np.ndarray) for array in arrays), [type(a) for a in arrays]


def test_value_previews_match_transformers(session):
    expected = reference_values(str(checkpoint("qwen2")), "qwen2", PROMPT)
    engine_path = "model.model.layers.1"
    summary = session.value(PROMPT, f"{engine_path}.layer_output").result(timeout=120)
    want = expected[("layer_output", 1)][0]
    assert summary.shape == tuple(expected[("layer_output", 1)].shape)
    np.testing.assert_allclose(summary.preview, want[:, : summary.preview.shape[1]].cpu().numpy(), atol=1e-4)
    assert summary.stats["max"] == pytest.approx(float(want.max()), abs=1e-4)
    neurons = session.value(PROMPT, f"{engine_path}.mlp.mlp_neurons").result(timeout=120)
    np.testing.assert_allclose(neurons.preview, expected[("mlp_neurons", 1)][0][:, :16].cpu().numpy(), atol=1e-4)
    before = session.engine_requests
    assert session.value(PROMPT, f"{engine_path}.layer_output").result(timeout=5) is summary  # cached
    assert session.engine_requests == before
    with pytest.raises(RequestRefused, match="a gated MLP on vLLM"):
        session.value(PROMPT, f"{engine_path}.mlp.mlp_activation").result(timeout=60)


def test_described_shapes_are_the_engines(session, result):
    engine = session._engine()
    saved = trace_values(engine, PROMPT)
    shapes = result.shapes
    count = len(result.tokens)
    read = {
        **{f"model.{name}": saved[name] for name in ("input_ids", "token_embeddings", "logits", "next_token_probs")},
        "model.input_size": saved["input_size"],
    }
    for (name, layer), value in ((key, v) for key, v in saved.items() if isinstance(key, tuple)):
        read[next(d.id for d in engine.describe() if d.layer == layer and d.name == name)] = value
    for value_id, value in read.items():
        expected = (len(value),) if isinstance(value, torch.Size) else tuple(value.shape)
        assert shapes[value_id] == expected, value_id
    assert shapes["model.model.layers.0.mlp.mlp_activation"] is None  # not served
    assert shapes["model.model.layers.0.layer_output"] == (1, count, 128)


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
    assert values["model.model.layers.1.self_attn.attention_probabilities"]["shape"] == [1, 4, tokens, tokens]
    gated = values["model.model.layers.0.mlp.mlp_activation"]
    assert not gated["available"] and gated["reason"].startswith("a gated MLP on vLLM")
    assert values["model.lm_head_output"]["reason"].startswith("vLLM never calls lm_head")
    assert values["model.model.layers.0.self_attn.attention_probabilities"]["writable"] is False
    assert values["model.model.layers.0.self_attn.attention_queries"]["writable"] is True
    layers = next(child for child in root["children"] if child["native"] == "model")["children"]
    blocks = [node for node in layers if node["native"] == "layers"][0]["children"]
    assert [block["repeat"]["index"] for block in blocks] == [0, 1]


def test_description_follows_execution_order(session):
    described = session.describe()
    blocks = [v for v in described if v.layer == 0]
    assert [v.name for v in blocks][0] == "layer_input" and blocks[-1].name == "layer_output"
    assert [v.order for v in blocks] == sorted(v.order for v in blocks)
    assert described[0].name == "input_ids" and described[-1].layer is None
    support = session.support()
    for value in described:
        if value.layer == 0:
            key = value.name if not value.part else f"{value.part}.{value.name}"
            assert support[key] == value.reason, key
        elif value.layer is None:
            assert support[value.name] == value.reason, value.name


def test_a_result_too_large_is_refused_and_the_next_request_succeeds(session):
    session.max_result_bytes = 200
    try:
        with pytest.raises(ResultTooLarge, match="shorten the prompt.*still serving"):
            session.prompt(LONGER, key="limit").result(timeout=60)
        with pytest.raises(ResultTooLarge, match="narrow the lens window"):
            session.lens(LONGER, 1, 11, key="limit").result(timeout=60)
    finally:
        session.max_result_bytes = MAX_RESULT_BYTES
    assert session.prompt(LONGER, key="limit").result(timeout=120).tokens.texts[0] == "The"


def test_a_new_prompt_drops_the_old_prompts_pending_work(session):
    gate = threading.Event()
    blocker = session.request(lambda engine: gate.wait(60), key="blocker")
    pending = session.attention(MARKUP, 1, key="drop")
    lens = session.lens(MARKUP, 0, 2, key="drop")
    newer = session.prompt(PROMPT, key="drop")
    gate.set()
    blocker.result(timeout=60)
    assert isinstance(pending.exception(timeout=60), Superseded)
    assert isinstance(lens.exception(timeout=60), Superseded)
    assert newer.result(timeout=120).prompt == PROMPT


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
    with pytest.raises(RequestRefused, match="empty"):
        session.prompt("   ").result(timeout=60)
    with pytest.raises(RequestRefused, match="max_model_len=64"):
        session.prompt("Paris " * 80).result(timeout=60)

    def broken(engine):
        raise ValueError("a widget's request went wrong")

    with pytest.raises(ValueError, match="went wrong"):
        session.request(broken, key="broken").result(timeout=60)
    again = session.prompt(PROMPT).result(timeout=120)
    np.testing.assert_array_equal(again.lens.top_ids, result.lens.top_ids)


def test_markup_tokens_are_plain_text(session):
    markup = session.prompt(MARKUP).result(timeout=120)
    assert "".join(markup.tokens.texts) == MARKUP
    assert any("<" in text for text in markup.tokens.texts)
    labels = markup.tokens.labels()
    assert len(set(labels)) == len(labels)  # repeated tokens kept apart


def test_the_tree_and_the_tokens_come_before_the_engine(session, result):
    """What the explorer paints first needs no engine: the tree (shapes and reasons) and
    the tokens exist seconds into the start, and they are the prompt request's."""
    assert session.described.done()
    assert session.described_seconds < session.start_seconds
    assert session.tokens(PROMPT) == result.tokens
    assert session.tree(len(session.tokens(PROMPT))) == session.tree(result)


def test_vllm_logs_go_to_the_sessions_log_file(session, result):
    """vLLM's start and settings are in the session's log file (not the notebook)."""
    assert session.log_path is not None and session.log_path.exists()
    text = session.log_path.read_text(encoding="utf-8", errors="replace")
    assert "vllm" in text and "INFO" in text


def test_a_prompt_that_would_not_fit_in_memory_is_refused_before_it_runs(session):
    """The memory guard, with the free memory lowered: a prompt whose recomputed pattern
    and activations would not fit is refused with the estimate and what fits, before
    its trace, and the engine serves the next request."""
    from nnterp_widgets.session.memory import MemoryRefused, request_bytes

    engine = session._worker.engine
    text = LONGER + " again"  # a prompt no other test asked for: nothing of it is cached
    tokens = len(session.tokens(text))
    from nnterp_widgets.engine.platform import on_cpu

    # free=0: the smallest blocks a GPU takes, so this limit is under the estimate at any block
    need = request_bytes(engine, tokens, row_blocks=1, forward=on_cpu(), device="cpu" if on_cpu() else "cuda", free=0)
    session.memory_limit = need  # under the estimate once the headroom is kept
    try:
        with pytest.raises(MemoryRefused, match=r"Shorten the prompt to about \d+ tokens"):
            session.prompt(text, key="memory").result(60)
        with pytest.raises(MemoryRefused):
            session.attention(text, 1, key="memory").result(60)
        session.memory_limit = 10 * need
        assert len(session.prompt(text, key="memory").result(120).tokens) == tokens
    finally:
        session.memory_limit = None


def test_open_says_device_and_dtype(session):
    assert session.device.split()[0] == devices.DEVICE  # "cpu", or "cuda (NVIDIA H200)"
    assert session.dtype == "float32"  # asked for by the tests: fidelity keeps float32


def test_the_session_engine_runs_in_this_process_and_a_second_is_refused(session):
    """On the CPU a session's engine runs in the kernel's process (no engine processes to
    start); vLLM keeps one distributed state per process, so while it is open another
    in-process engine is refused with the reason, and the next session would start its
    engine in vLLM's own processes."""
    from nnterp_widgets.engine import platform
    from nnterp_widgets.engine.standardized import StandardizedVLLM

    if not platform.on_cpu():
        pytest.skip("off the CPU a session's engine runs in vLLM's own processes")
    engine = session._worker.engine
    assert engine.engine_pids == [] and engine.alive
    assert not platform.in_process_default()
    with pytest.raises(RuntimeError, match="another engine already runs in this process"):
        StandardizedVLLM(str(engine.args[0]), dtype="float32", in_process=True)
    assert session.prompt(PROMPT).result(120).tokens.texts[0] == "The"  # still serving


def test_value_descriptions_are_kept_per_engine_and_length(session, result):
    """The prompt request describes the engine's values once per prompt length: they do
    not change, and describing every value of every layer cost 18 ms a request at 32 layers."""
    from nnterp_widgets.requests import common

    engine = session._engine()
    count = len(result.tokens)
    kept = common.described(engine, count)
    assert kept == engine.describe(count)
    assert common.described(engine, count) is kept  # not described again
    session.prompt(PROMPT + " the", key="described").result(timeout=120)
    assert common.described(engine, count) is kept


def test_a_users_own_engine_is_wrapped_not_copied(session, result):
    """`Session.open(model)` and the views take the engine a notebook already made: the
    session wraps it (no second engine), a second wrap is the same session, and closing
    the wrapper leaves the engine open."""
    from nnterp_widgets import Explorer
    from nnterp_widgets.session import Session

    engine = session._engine()
    wrapped = Session.open(engine)
    try:
        assert Session.open(engine) is wrapped and wrapped is not session and wrapped.engine_opens == 1
        assert wrapped.wait(60)._engine() is engine
        again = wrapped.prompt(PROMPT).result(timeout=120)
        np.testing.assert_array_equal(again.lens.top_ids, result.lens.top_ids)
        explorer = Explorer(engine, prompt=PROMPT)
        try:
            assert explorer.session is wrapped
            assert explorer.wait(120).tokens == result.tokens
        finally:
            explorer.close()
        with pytest.raises(TypeError, match="no engine settings"):
            Session.open(engine, dtype="float32")
    finally:
        wrapped.close()
    assert session.prompt(PROMPT + " Paris").result(timeout=120).tokens  # the engine still serves


# -- the research calls: token ids, whole patterns, induction (issue 37) ----------------


def test_token_ids_are_a_prompt_as_they_are(session, result):
    """A list of ids, a 1-D integer numpy array or torch tensor is the prompt's ids: the
    same answer as the text they tokenise to; what is not a prompt is refused, saying what is."""
    from nnterp_widgets.requests.common import PROMPT_KINDS

    ids = session.tokenizer()(PROMPT)["input_ids"]
    for given in (ids, np.array(ids), torch.tensor(ids)):
        again = session.prompt(given).result(timeout=120)
        assert again.tokens == result.tokens
        np.testing.assert_array_equal(again.lens.top_ids, result.lens.top_ids)
    assert session.lens(ids, 0, 3).result(timeout=120).top_ids.shape[1] == 3  # cached by its ids
    with pytest.raises(TypeError, match="a list of ints") as caught:
        session.prompt(["The", " Eiffel"]).result(timeout=60)
    assert PROMPT_KINDS in str(caught.value) and "of str" in str(caught.value)
    with pytest.raises(TypeError, match="1-D"):
        session.prompt(np.array([ids])).result(timeout=60)
    with pytest.raises(RequestRefused, match="id list is empty"):
        session.prompt([]).result(timeout=60)
    vocab = session._engine().vocab_size
    with pytest.raises(RequestRefused, match=rf"token id {vocab} is outside the vocabulary \(ids 0..{vocab - 1}\)"):
        session.attribute(ids[:-1] + [vocab], " Paris").result(timeout=60)
    assert session.prompt(PROMPT + " Paris").result(timeout=120).tokens  # the next request is served


def test_bos_puts_the_tokenizers_bos_token_first_or_none(session, result):
    """``bos=True`` runs the prompt with the tokenizer's BOS token first (once), ``False``
    without one, ``None`` as the tokenizer tokenises; in every request that takes a prompt."""
    tokenizer = session.tokenizer()
    bos = tokenizer.bos_token_id
    ids = tokenizer(PROMPT)["input_ids"]
    assert bos is not None and ids[0] != bos  # this tokenizer adds none by itself
    assert session.tokens(PROMPT, bos=True).ids == (bos, *ids)
    assert session.tokens([bos, *ids], bos=True).ids == (bos, *ids)  # never twice
    assert session.tokens([bos, *ids], bos=False).ids == tuple(ids)
    assert session.tokens(PROMPT, bos=None).ids == tuple(ids)
    first = session.prompt(PROMPT, bos=True).result(timeout=120)
    explicit = session.prompt([bos, *ids]).result(timeout=120)
    assert first.tokens.ids == (bos, *ids) and first.tokens == explicit.tokens
    np.testing.assert_array_equal(first.lens.top_ids, explicit.lens.top_ids)
    assert not np.array_equal(first.lens.top_probs[:, -1], result.lens.top_probs[:, -1])  # the BOS token matters
    roles = session.head_roles(PROMPT, bos=True).result(timeout=120)
    assert len(roles.tokens) == len(ids) + 1
    with pytest.raises(TypeError, match="bos is True"):
        session.prompt(PROMPT, bos="yes")


def test_patterns_that_would_not_fit_are_refused_saying_what_fits(session):
    from nnterp_widgets.session.memory import MemoryRefused, request_bytes

    engine = session._worker.engine
    tokens = len(session.tokens(LONGER))
    from nnterp_widgets.engine.platform import on_cpu

    session.memory_limit = request_bytes(engine, tokens, patterns=2, forward=on_cpu())
    try:
        with pytest.raises(MemoryRefused, match=r"Shorten the prompt to about \d+ tokens"):
            session.patterns(LONGER).result(60)
    finally:
        session.memory_limit = None
    assert session.patterns(LONGER, [0]).result(120).values.shape[0] == 1


def test_every_result_has_a_table_with_a_row_per_cell(session, result):
    """``to_pandas()``: one row per cell, named columns, each cell's numbers those of the
    result's arrays (the arrays themselves are held to transformers elsewhere)."""
    lens = result.lens.to_pandas()
    layers, count, k = result.lens.top_ids.shape
    assert len(lens) == layers * count * k and list(lens.columns) == [
        "layer", "position", "rank", "token", "id", "probability", "text"
    ]  # fmt: skip
    cell = lens[(lens.layer == 1) & (lens.position == result.lens.start + 1) & (lens["rank"] == 0)].iloc[0]
    assert cell.id == result.lens.top_ids[1, 1, 0] and cell.token == result.tokens.texts[result.lens.start + 1]
    assert result.to_pandas().equals(lens)

    patterns = session.patterns(PROMPT).result(timeout=120)
    frame = patterns.to_pandas()
    assert len(frame) == patterns.values.size
    row = frame[(frame.layer == 1) & (frame["head"] == 2) & (frame["query"] == 3) & (frame["key"] == 1)].iloc[0]
    assert row.weight == patterns.values[1, 2, 3, 1] and row.key_token == patterns.tokens.texts[1]
    attention = session.attention(PROMPT, 1).result(timeout=120)
    assert len(attention.to_pandas()) == attention.quantized.size

    attribution = session.attribute(PROMPT, " Paris", " Rome").result(timeout=120)
    parts = attribution.to_pandas()
    assert parts.effect.sum() == pytest.approx(attribution.total, abs=1e-3)
    assert (parts.part == "head").sum() == attribution.heads.size

    roles = session.head_roles(LONGER).result(timeout=120)
    table = roles.to_pandas()
    assert set(table.role) == set(roles.scores) and len(table) == sum(np.size(s) for s in roles.scores.values())

    whole = session.value(PROMPT, "model.model.layers.0.mlp.mlp_output", full=True).result(timeout=120)
    values = whole.to_pandas()
    assert len(values) == whole.tensor.numel() and values.value.iloc[-1] == whole.tensor.reshape(-1)[-1].item()

    generation = session.generate(PROMPT, 3).result(timeout=120)
    steps = generation.to_pandas()
    assert set(steps.step) == set(range(len(generation.steps))) and "token" in steps

    occlusion = session.occlude(PROMPT, " Paris").result(timeout=120)
    rows = occlusion.to_pandas()
    assert len(rows) == len(occlusion.tokens)
    np.testing.assert_array_equal(rows.delta_logit.to_numpy(), occlusion.delta_logit)

    ablation = session.ablation(PROMPT, [(0, 1)]).result(timeout=120)
    assert ablation.to_pandas().delta.tolist() == pytest.approx(ablation.delta.tolist())
    graph = session.contributions(PROMPT).result(timeout=120)
    assert len(graph.to_pandas()) == len(graph.shares)
    modes = session.follow(PROMPT, " Paris").result(timeout=120)
    followed = modes.to_pandas()
    assert len(followed) == modes.top_ids.size and followed["target_rank"].min() >= 1
