"""Questions over many prompts (issue 38): ``session.each(prompts)`` on the real engine
(the tiny qwen2, max_model_len 64). Each prompt's result is what the single call gives;
many prompts go in one engine request; a bad prompt is answered in its slot and the
others run; progress counts prompts and a cancel stops at the next chunk."""

from __future__ import annotations

import dataclasses

import devices
import numpy as np
import pytest

from nnterp_widgets.requests import MAX_RESULT_BYTES, Results, RequestRefused
from nnterp_widgets.requests.batches import FIRST_PROMPTS
from nnterp_widgets.requests.progress import Progress, Stopped

PROMPTS = [
    "The Eiffel Tower is in",
    "The Colosseum is in the city of",
    "Paris is the capital of",
    "A cat sat on the",
    "The river runs to the sea and",
    "One two three four five",
]
LONG = "word " * 80  # past the engine's 64 tokens


@pytest.fixture(scope="module")
def ids(session):
    tokenizer = session.tokenizer()
    return [tokenizer(text)["input_ids"] for text in PROMPTS]


def test_each_prompt_is_the_single_prompt_request_in_fewer_engine_requests(session):
    results = session.each(PROMPTS).prompt(window=1).result(timeout=300)
    assert 1 <= results.requests < len(PROMPTS) and len(results) == len(PROMPTS)
    assert isinstance(results, Results) and results.kind == "prompt" and not results.errors
    for text, got in zip(PROMPTS, results, strict=True):
        want = session.prompt(text, window=1).result(timeout=120)
        assert got.tokens == want.tokens and got.prompt == text
        np.testing.assert_array_equal(got.lens.top_ids, want.lens.top_ids)
        np.testing.assert_allclose(got.lens.top_probs, want.lens.top_probs, atol=1e-5)
        np.testing.assert_array_equal(got.attention.quantized, want.attention.quantized)
    frame = results.to_pandas()
    assert list(frame.columns[:2]) == ["prompt", "layer"] and set(frame["prompt"]) == set(range(len(PROMPTS)))
    mean = results.mean()
    last = (
        np.stack([r.lens.top_ids[:, -1, 0] for r in results])
        == np.array([r.lens.model_top_ids[0] for r in results])[:, None]
    )
    np.testing.assert_allclose(mean["agrees_with_model"].to_numpy(), last.mean(0))
    assert mean["agrees_with_model"].iloc[-1] == 1.0  # the last layer's lens is the model


def test_a_stream_refills_the_engine_as_prompts_finish_and_keeps_their_order(session, monkeypatch):
    """A registration keeps at most `IN_FLIGHT` prompts in the engine and adds the next as
    each finishes: with two at a time, every prompt still gets its own answer, in order."""
    from nnterp_widgets.engine import standardized

    monkeypatch.setattr(standardized, "IN_FLIGHT", 2)
    prompts = PROMPTS + PROMPTS[::-1]
    results = session.each(prompts).lens(1).result(timeout=300)
    assert results.requests == 1 and not results.errors
    tokenizer = session.tokenizer()
    for text, got in zip(prompts, results, strict=True):
        count = len(tokenizer(text)["input_ids"])
        want = session.lens(text, count - 1, count).result(timeout=120)
        assert got.tokens == want.tokens
        np.testing.assert_array_equal(got.top_ids, want.top_ids)


def test_a_prompt_the_engine_cannot_take_is_answered_in_its_slot(session, ids):
    batch = [PROMPTS[0], LONG, PROMPTS[1]]
    results = session.each(batch).lens(2).result(timeout=300)
    assert set(results.errors) == {1} and isinstance(results[1], RequestRefused)
    assert "this engine takes at most 63" in str(results[1])
    for slot, index in ((0, 0), (2, 1)):
        count = len(ids[index])
        want = session.lens(PROMPTS[index], count - 2, count).result(timeout=120)
        np.testing.assert_array_equal(results[slot].top_ids, want.top_ids)
        np.testing.assert_allclose(results[slot].top_probs, want.top_probs, atol=1e-5)
    assert len(results.answered) == 2 and len(results.to_pandas()["prompt"].unique()) == 2
    # Token id lists are prompts too, used as they are.
    by_ids = session.each(ids[:2]).lens(1).result(timeout=300)
    assert [r.tokens.ids for r in by_ids] == [tuple(i) for i in ids[:2]]


def test_each_attribution_is_the_single_attribution(session):
    answers = [" Paris", " Rome", " Paris", " Rome", " ocean", " Paris"]  # ' ocean' is 3 tokens here
    results = session.each(PROMPTS).attribute(answers, " the").result(timeout=300)
    assert set(results.errors) == {4} and "the answer ' ocean' is 3 tokens" in str(results[4])
    for text, answer, got in [(PROMPTS[i], answers[i], results[i]) for i in (0, 1, 2, 3, 5)]:
        want = session.attribute(text, answer, " the").result(timeout=120)
        assert got.answer == want.answer and got.foil == want.foil
        np.testing.assert_allclose(got.heads, want.heads, atol=1e-4)
        np.testing.assert_allclose(got.metric, want.metric, atol=1e-4)
    mean = results.mean()
    heads = mean[mean["part"] == "head"]
    np.testing.assert_allclose(
        heads["effect"].to_numpy(), np.mean([r.heads for _, r in results.answered], axis=0).reshape(-1), atol=1e-9
    )
    with pytest.raises(RequestRefused, match="answers has 2 entries for 6 prompts"):
        session.each(PROMPTS).attribute([" Paris", " Rome"])


def test_each_head_roles_and_value(session):
    roles = session.each(PROMPTS).head_roles().result(timeout=300)
    for text, got in zip(PROMPTS, roles, strict=True):
        want = session.head_roles(text).result(timeout=120)
        np.testing.assert_allclose(got.scores["previous"], want.scores["previous"], atol=1e-5)
    mean = roles.mean()
    np.testing.assert_allclose(mean.scores["first"], np.mean([r.scores["first"] for r in roles], axis=0), atol=1e-6)
    assert mean.top("previous", 1)
    value_id = "model.model.layers.1.layer_output"
    last = session.each(PROMPTS[:3]).value(value_id, "last").result(timeout=300)
    means = session.each(PROMPTS[:3]).value(value_id, "mean").result(timeout=300)
    for text, got_last, got_mean in zip(PROMPTS[:3], last, means, strict=True):
        whole = session.value(text, value_id, full=True).result(timeout=120).tensor[0].float().numpy()
        # On CUDA a kernel's reduction order depends on the batch (devices.RUN_TO_RUN):
        # there the bound is relative to the stream's scale.
        atol = 1e-5 * (1.0 if devices.DEVICE == "cpu" else float(np.abs(whole).max()))
        np.testing.assert_allclose(got_last, whole[-1], atol=atol)
        np.testing.assert_allclose(got_mean, whole.mean(0), atol=atol)
    np.testing.assert_allclose(last.mean(), np.mean(list(last), axis=0))
    with pytest.raises(
        RequestRefused, match="reduce is how a value becomes one vector per prompt: last, mean; got 'max'"
    ):
        session.each(PROMPTS[:1]).value(value_id, "max")
    unknown = session.each(PROMPTS[:2]).value("model.nothing", "last").result(timeout=60)
    assert set(unknown.errors) == {0, 1} and "no standard value 'model.nothing'" in str(unknown[0])


def test_each_generation_and_steering_are_the_single_calls(session):
    results = session.each(PROMPTS[:4]).generate(3).result(timeout=300)
    for text, got in zip(PROMPTS[:4], results, strict=True):
        want = session.generate(text, 3).result(timeout=120)
        assert got.generated.ids == want.generated.ids
    vector = session.steering_vector("Paris is a city in France.", "The river runs to the sea.", 1).result(60)
    steered = session.each(PROMPTS[:3]).steer(vector, 1, 8.0, 3).result(timeout=300)
    for text, got in zip(PROMPTS[:3], steered, strict=True):
        want = session.steer(text, vector, 1, 8.0, 3).result(timeout=120)
        assert got.steered.generated.ids == want.steered.generated.ids
        assert got.plain.generated.ids == want.plain.generated.ids
    assert set(steered.to_pandas()["run"]) == {"steered", "plain"}


def test_a_batch_of_generations_ships_the_module_tree_at_most_once_not_once_a_prompt(session, monkeypatch):
    """An invoke ships every object its code names; naming the tracer (``tracer.iter``)
    would ship the model's whole tree with each prompt's invoke (`engine.steps`)."""
    from nnsight.intervention.envoy import Envoy

    tree = session.request(lambda model: len(list(model.modules()))).result(60)
    shipped = []
    pickle = Envoy.__getstate__
    monkeypatch.setattr(Envoy, "__getstate__", lambda envoy: shipped.append(envoy.path) or pickle(envoy))
    results = session.each(PROMPTS[:4]).generate(1).result(timeout=300)  # one chunk: one trace
    monkeypatch.undo()
    assert not results.errors and all(len(got.generated.ids) == 1 for got in results)
    assert len(shipped) < tree, f"{len(shipped)} envoys shipped for 4 prompts; the tree has {tree}"


@pytest.mark.parametrize(
    "prompts, error, message",
    [
        ([], RequestRefused, "the batch has no prompts"),
        (["The cat", [1, 2, 3]], RequestRefused, "all texts or all token id lists"),
        ("The cat", TypeError, "one prompt: wrap it in a list"),
        ([1, 2, 3], TypeError, "one prompt: wrap it in a list"),
        (42, TypeError, "a batch is a list of prompts"),
    ],
)
def test_a_batch_that_is_not_one_is_refused_saying_what_is(session, prompts, error, message):
    with pytest.raises(error, match=message):
        session.each(prompts)
    assert len(session.each(PROMPTS[:1]).lens().result(timeout=60)) == 1


def test_prompts_from_a_text_file_and_a_pandas_column(session, tmp_path):
    import pandas

    path = tmp_path / "prompts.txt"
    path.write_text("\n".join(PROMPTS[:3]) + "\n\n")
    assert session.each(path).prompts == tuple(PROMPTS[:3])
    assert session.each(pandas.Series(PROMPTS[:2])).prompts == tuple(PROMPTS[:2])
    frame = session.each(path).lens().result(timeout=120).to_pandas()
    out = tmp_path / "results.csv"
    frame.to_csv(out, index=False)
    assert pandas.read_csv(out)["prompt"].nunique() == 3


class StopAfter(Progress):
    """Stops the request after ``chunks`` chunks, keeping each partial answer."""

    def __init__(self, chunks: int) -> None:
        self.chunks, self.seen, self.total = chunks, [], None

    def start(self, total: int) -> None:
        self.total = total

    def advance(self, count: int, partial=None) -> None:
        self.seen.append((count, partial()))
        if len(self.seen) >= self.chunks:
            raise Stopped()


def _saves_left(engine) -> list:
    """What a plain request (no trace of its own) brings back: an installed edit's saves."""
    outputs = engine.vllm_entrypoint.generate(["A cat sat"], use_tqdm=False)
    return [dict(getattr(output, "saves", None) or {}) for output in outputs]


@pytest.mark.parametrize("path", ["invokes", "registration"])
def test_progress_counts_prompts_and_a_stop_ends_at_a_chunk(session, monkeypatch, path):
    """Through invokes or a registration, a stop ends the batch with its partial answer
    (after a chunk of invokes; after an engine step of a registration's stream, whose
    unfinished prompts are taken out of the engine), and no registered reads are left."""
    from nnterp_widgets import StandardizedVLLM
    from nnterp_widgets.requests import LENS_QUESTION, check_prompt, lens_plan, run_each

    # A registration streams its prompts: more than one engine step holds (the scheduler's
    # max_num_seqs), so that the stop finds some still in the engine.
    prompts = PROMPTS * (100 if path == "registration" else 4)
    heard = StopAfter(1)
    question = LENS_QUESTION if path == "registration" else dataclasses.replace(LENS_QUESTION, shared=None)
    installed = []
    original = StandardizedVLLM.registered
    monkeypatch.setattr(
        StandardizedVLLM, "registered", lambda model, *args: installed.append(args) or original(model, *args)
    )

    def prepare(model, index, prompt):
        ids = check_prompt(model, prompt)
        return lens_plan(model, ids, len(ids) - 1, len(ids))  # the last position: the same from the end

    def run(engine):
        with pytest.raises(Stopped):
            run_each(engine, prompts, question, prepare, heard)
        left = engine.vllm_entrypoint.llm_engine.has_unfinished_requests()
        return left, _saves_left(engine)

    # Nothing of the stopped batch is left in the engine: the next request is alone.
    assert session.request(run).result(timeout=300) == (False, [{}])
    assert len(installed) == (path == "registration")
    assert heard.total == len(prompts)
    ((count, partial),) = heard.seen
    if path == "invokes":
        assert count == FIRST_PROMPTS  # the first chunk, then the stop
    assert 0 < count == partial.done < len(prompts)
    assert sum(item is not None for item in partial.items) == count
    prompts = PROMPTS * 4
    job = session.each(prompts).lens(progress=False)
    assert len(job.result(timeout=300)) == len(prompts) and job.progress == (len(prompts), len(prompts))


def test_prompts_that_share_their_reads_go_through_one_registration(session, monkeypatch):
    """`REGISTER_AT` or more prompts whose reads take the same arguments (the window counted
    from the end) are asked through one edit installed on the engine: each answer is the
    single call's, a prompt whose arguments are its own (shorter than the window) takes an
    invoke, a bad prompt keeps its slot, and no edit is left on the engine afterwards."""
    from nnterp_widgets import StandardizedVLLM
    from nnterp_widgets.requests import batches

    installed = []
    original = StandardizedVLLM.registered

    def spy(model, reads, args):
        installed.append((reads.__name__, args))
        return original(model, reads, args)

    monkeypatch.setattr(StandardizedVLLM, "registered", spy)
    prompts = [*PROMPTS, *(text + " and" for text in PROMPTS[:3]), "Hi", LONG]
    assert len(prompts) - 2 >= batches.REGISTER_AT
    results = session.each(prompts).lens(3).result(timeout=300)
    assert [name for name, _ in installed] == ["lens_reads"] and installed[0][1][:2] == (-3, None)
    assert set(results.errors) == {len(prompts) - 1}
    for text, got in zip(prompts[:-1], results, strict=False):
        count = len(got.tokens)
        want = session.lens(text, max(0, count - 3), count).result(timeout=120)
        assert got.tokens == want.tokens and got.start == want.start
        np.testing.assert_array_equal(got.top_ids, want.top_ids)
        np.testing.assert_allclose(got.top_probs, want.top_probs, atol=1e-5)
    assert session.request(_saves_left).result(timeout=60) == [{}]
    installed.clear()
    monkeypatch.setattr(batches, "REGISTER_AT", 10**6)  # every prompt an invoke
    again = session.each(prompts).lens(3).result(timeout=300)
    assert not installed
    for got, want in zip(results[:-1], again[:-1], strict=True):
        np.testing.assert_array_equal(got.top_ids, want.top_ids)


def test_a_registrations_requests_each_carry_their_own_settings(session, monkeypatch):
    """vLLM deep-copies the sampling settings of every request it adds unless they are marked
    as that request's own (``skip_clone``): a registration gives each request its own copy
    and marks it, so that nothing of one request's settings is shared with another's."""
    from vllm import SamplingParams

    from nnterp_widgets.engine.standardized import STREAM_ID
    from nnterp_widgets.requests import batches

    engine = session.request(lambda model: model.vllm_entrypoint.llm_engine).result(timeout=60)
    added = []
    original = engine.add_request

    def spy(request_id, prompt, params, *args, **kwargs):
        added.append((request_id, params))
        return original(request_id, prompt, params, *args, **kwargs)

    monkeypatch.setattr(engine, "add_request", spy)
    prompts = [*PROMPTS, *(text + " and" for text in PROMPTS)]
    assert len(prompts) >= batches.REGISTER_AT
    results = session.each(prompts).lens(3).result(timeout=300)
    assert not results.errors and len(results) == len(prompts)
    streamed = [params for request_id, params in added if request_id.startswith(STREAM_ID)]
    assert len(streamed) == len(prompts) and len({id(params) for params in streamed}) == len(prompts)
    assert all(params.max_tokens == 1 and params.temperature == 0.0 for params in streamed)
    if hasattr(SamplingParams(), "skip_clone"):
        assert all(params.skip_clone for params in streamed)


def test_the_dataset_view_lists_the_batch_and_opens_a_row_in_the_explorer(session, tmp_path):
    pytest.importorskip("ipywidgets")  # the rest of this module needs no widget packages (a GPU image may lack them)
    import plotly.io as pio

    from nnterp_widgets import DatasetView, Explorer, plot

    markup = "Paris <img src=x onerror=alert(1)> is"
    prompts = [*PROMPTS[:3], LONG, markup]
    results = session.each(prompts).prompt(window=1).result(timeout=300)
    explorer = Explorer(session, prompt=PROMPTS[0])
    try:
        view = DatasetView(results, explorer=explorer)
        rows = view.grid.rows
        assert [row[0] for row in rows] == list(range(len(prompts))) and rows[4][1] == markup
        tokenizer = session.tokenizer()
        for row, item in zip(rows[:3], results[:3], strict=True):
            assert row[2] == tokenizer.decode([int(item.lens.model_top_ids[0])])
            assert row[3] == pytest.approx(float(item.lens.model_top_probs[0]))
        assert rows[3][3] is None and "this engine takes at most 63" in rows[3][4]  # the failed prompt says why
        assert "1 failed" in view.grid.caption and view.grid.metric == "p(answer)"
        name, curve = view.table.curve
        np.testing.assert_allclose(curve, results.mean()["agrees_with_model"].to_numpy())
        assert list(view.figure.data[0].y) == pytest.approx(list(curve))
        view.grid.theme = "dark"  # as the table's JS reports a dark page: the figure follows
        assert view.figure.layout.template == pio.templates["plotly_dark"]
        view.grid.theme = "light"
        assert view.figure.layout.template == pio.templates["plotly"]
        view.grid.selected = 2  # as a click on the row does
        assert explorer.prompt_box.value == PROMPTS[2]
        explorer.wait()
        page = explorer.to_html(str(tmp_path / "view.html"))
        assert "Over a dataset" in page and "<img src=x" not in page and "&lt;img src=x" in page
        alone = view.to_html()
        assert alone.count("<tr") == len(prompts) + 1 and "plotly" in alone
    finally:
        explorer.close()
    assert plot(results).data[0].type == "scatter"
    attribution = session.each(PROMPTS[:2]).attribute(" Paris").result(timeout=300)
    assert DatasetView(attribution).grid.metric == "metric"


def test_each_patterns_is_each_prompts_pattern_summary(session):
    """`each(...).patterns()`: each head's mean row entropy and distance back, what the
    single call's whole patterns give (`Patterns.stats`), without shipping them."""
    results = session.each(PROMPTS[:4]).patterns().result(timeout=300)
    for text, got in zip(PROMPTS[:4], results, strict=True):
        whole = session.patterns(text).result(timeout=120)
        want = whole.stats()
        assert got.layer_ids == whole.layer_ids and got.entropy.shape == (len(whole.layer_ids), whole.values.shape[1])
        np.testing.assert_allclose(got.entropy, want.entropy, atol=1e-4)
        np.testing.assert_allclose(got.distance, want.distance, atol=1e-4)
        # By hand for one head: the mean over queries of -sum p log p, and of sum p (q - k).
        p = whole.values[0, 0].astype(np.float64)
        q, k = np.indices(p.shape)
        np.testing.assert_allclose(
            got.entropy[0, 0], np.mean(-(p * np.log(np.clip(p, 1e-30, None))).sum(-1)), atol=1e-4
        )
        np.testing.assert_allclose(got.distance[0, 0], np.mean((p * np.clip(q - k, 0, None)).sum(-1)), atol=1e-4)
    mean = results.mean()
    np.testing.assert_allclose(mean.entropy, np.mean([r.entropy for r in results], axis=0))
    assert len(results.to_pandas()) == 4 * results[0].entropy.size
    one = session.each(PROMPTS[:2]).patterns([1]).result(timeout=300)
    assert one[0].layer_ids == (1,)


def test_a_chunk_returns_no_more_than_one_request_may_carry(session):
    """The batch sizes its chunks by what each prompt's answer weighs (`prompt_bytes`):
    under a small result limit, fewer prompts a request, the same answers."""
    from nnterp_widgets.requests import LENS_K, prompt_bytes

    engine = session._engine()
    weights = [prompt_bytes(engine, len(session.tokens(text)), 1, LENS_K, True) for text in PROMPTS]
    whole = session.each(PROMPTS).prompt(window=1).result(timeout=300)
    session.max_result_bytes = max(weights)  # each prompt fits alone; the six together do not
    try:
        cut = session.each(PROMPTS).prompt(window=1).result(timeout=300)
        assert not cut.errors and cut.requests >= sum(weights) / max(weights) > whole.requests
    finally:
        session.max_result_bytes = MAX_RESULT_BYTES
    for a, b in zip(whole, cut, strict=True):
        np.testing.assert_array_equal(a.lens.top_ids, b.lens.top_ids)
