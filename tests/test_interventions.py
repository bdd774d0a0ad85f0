"""Interventions on a real engine (issue 17): head ablation, activation patching and the
pair lens, held to the same interventions done with plain forward hooks in transformers
(float32, eager); requests per sweep counted; bad input, then a good request."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import devices
from conftest import open_session
from nnterp_widgets.checkpoints import checkpoint
from nnterp_widgets.requests.sites import InterventionError
from nnterp_widgets.interventions.patching import PATCH_CELLS, patch, patch_requests
from nnterp_widgets.requests.sites import SITES, ablate_heads, check_heads
from reference import _get, hf_reference, names_of

CLEAN = "The Eiffel Tower is in"
CORRUPTED = "The Colosseum Tower is in"  # same token count; the first token is shared
ANSWER, FOIL = " Paris", " Rome"
HEADS = [(1, 3), (0, 1), (1, 2)]
TOL = dict(atol=1e-4, rtol=1e-4)
#: A fused (hidden, residual) pair family and a plain-stream one. Per family, relative to
#: the attention module: the output projection, whose input is the heads' outputs; and the
#: final norm, for the lens.
FAMILIES = {"qwen2": ("o_proj", "model.norm"), "gpt2": ("c_proj", "transformer.ln_f")}


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request):
    return request.param


@pytest.fixture(scope="module")
def session(family):
    opened = open_session(family)
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def hf(family):
    model, tokenizer = hf_reference(str(checkpoint(family)), family)
    return Reference(model, tokenizer, family)


class Reference:
    """The transformers model and where each site is in it."""

    def __init__(self, model, tokenizer, family):
        self.model, self.tokenizer, self.family = model, tokenizer, family
        self.names = names_of(family)
        self.blocks = _get(model, self.names.layers)
        self.out_proj, self.norm = FAMILIES[family]

    def attention(self, layer):
        return _get(self.blocks[layer], self.names.attention)

    def site(self, site, layer):
        block = self.blocks[layer]
        return {
            "layer_output": block,
            "attention_output": _get(block, self.names.attention_out or self.names.attention),
            "mlp_output": _get(block, self.names.mlp_out or self.names.mlp),
            "attention_head_outputs": _get(self.attention(layer), self.out_proj),
        }[site]

    def lens(self, stream):
        return self.model.get_output_embeddings()(_get(self.model, self.norm)(stream))


def _ids(tokenizer, text):
    return tokenizer(text, return_tensors="pt")["input_ids"].to(devices.DEVICE)


def _hf_run(model, ids, hooks):
    """Logits of ``ids`` at the last position with ``hooks`` [(module, kind, fn)] on."""
    handles = []
    for module, kind, fn in hooks:
        register = module.register_forward_pre_hook if kind == "pre" else module.register_forward_hook
        handles.append(register(fn))
    try:
        with torch.no_grad():
            return model(ids).logits[0, -1]
    finally:
        for handle in handles:
            handle.remove()


def _first(output):
    return output[0] if isinstance(output, tuple) else output


def _replace(output, tensor):
    return (tensor, *output[1:]) if isinstance(output, tuple) else tensor


def _hf_patch(hf, site, answer, foil, positions=None, metric="logit_diff", noise=None):
    """The sweep in transformers: read the clean values with hooks, then patch one cell per
    forward of the corrupted prompt. ``noise = (subject, scale, seed)``: causal tracing,
    the corrupted run being the clean prompt with noise on the subject's embeddings,
    drawn as the engine draws it. Returns (clean metric, corrupted metric, patched)."""
    model, tokenizer = hf.model, hf.tokenizer
    layers = model.config.num_hidden_layers
    heads = model.config.num_attention_heads
    head_dim = model.config.hidden_size // heads
    clean = _ids(tokenizer, CLEAN)
    corrupted = clean if noise is not None else _ids(tokenizer, CORRUPTED)
    count = clean.shape[1]
    positions = list(range(count)) if positions is None else sorted(p % count for p in positions)
    heads_site = site == "attention_head_outputs"
    saved = {}
    noised = []
    if noise is not None:
        (start, stop), scale, seed = noise
        table = model.get_input_embeddings().weight[: model.config.vocab_size]
        unit = torch.randn((stop - start, model.config.hidden_size), generator=torch.Generator().manual_seed(seed))
        added = (unit * (scale * table.detach().float().cpu().std())).to(devices.DEVICE)

        def add_noise(m, args, out):
            x = out.clone()
            x[:, start:stop] += added
            return x

        noised = [(_get(model, hf.names.embed), "post", add_noise)]

    def reader(layer):
        if heads_site:
            return lambda m, args: saved.__setitem__(layer, args[0].detach().clone())
        return lambda m, args, out: saved.__setitem__(layer, _first(out).detach().clone())

    kind = "pre" if heads_site else "post"

    def measure(logits):
        logits = logits.float()
        if metric == "logit_diff":
            return float(logits[answer] - logits[foil])
        logprob = float(torch.log_softmax(logits, -1)[answer])
        return logprob if metric == "logprob" else float(np.exp(logprob))

    clean_metric = measure(_hf_run(model, clean, [(hf.site(site, l), kind, reader(l)) for l in range(layers)]))
    corrupted_metric = measure(_hf_run(model, corrupted, noised))
    columns = list(range(heads)) if heads_site else positions
    patched = np.zeros((layers, len(columns)))
    for layer in range(layers):
        for index, column in enumerate(columns):
            if heads_site:
                span = slice(column * head_dim, (column + 1) * head_dim)

                def hook(m, args, layer=layer, span=span):
                    x = args[0].clone()
                    x[:, positions, span] = saved[layer][:, positions, span]
                    return (x, *args[1:])
            else:

                def hook(m, args, out, layer=layer, column=column):
                    x = _first(out).clone()
                    x[:, column] = saved[layer][:, column]
                    return _replace(out, x)

            patched[layer, index] = measure(_hf_run(model, corrupted, [*noised, (hf.site(site, layer), kind, hook)]))
    return clean_metric, corrupted_metric, patched


@pytest.fixture(scope="module")
def answer_foil(hf):
    tokenizer = hf.tokenizer
    return (
        tokenizer(ANSWER, add_special_tokens=False)["input_ids"][0],
        tokenizer(FOIL, add_special_tokens=False)["input_ids"][0],
    )


@pytest.mark.parametrize("site", SITES)
def test_patch_matches_transformers(session, hf, answer_foil, site):
    before = session.engine_requests
    result = session.patch(CLEAN, CORRUPTED, ANSWER, FOIL, site=site).result(timeout=300)
    assert session.engine_requests == before + 1
    model = hf.model
    clean_metric, corrupted_metric, patched = _hf_patch(hf, site, *answer_foil)
    assert (result.answer, result.foil) == answer_foil
    assert result.answer_text == ANSWER and result.foil_text == FOIL
    np.testing.assert_allclose(result.clean_metric, clean_metric, **TOL)
    np.testing.assert_allclose(result.corrupted_metric, corrupted_metric, **TOL)
    np.testing.assert_allclose(result.patched, patched, **TOL)
    expected = (patched - corrupted_metric) / (clean_metric - corrupted_metric)
    np.testing.assert_allclose(result.effect, expected, atol=1e-3)
    columns = model.config.num_attention_heads if site == "attention_head_outputs" else len(result.clean)
    assert result.effect.shape == (model.config.num_hidden_layers, columns)
    # Engine calls per sweep: one to read the clean values, then one per PATCH_CELLS cells.
    calls = patch_requests(session._engine(), len(result.clean), site)
    assert calls == 1 + -(-result.effect.size // PATCH_CELLS) == result.requests


def test_patch_end_points(session):
    result = session.patch(CLEAN, CORRUPTED, ANSWER, FOIL).result(timeout=300)
    assert result.end_points == (1.0, 0.0)
    # Patching the whole last stream at the last position is the clean run; the shared
    # first token's stream is the corrupted run's own.
    np.testing.assert_allclose(result.effect[-1, -1], 1.0, atol=1e-5)
    np.testing.assert_allclose(result.effect[:, 0], 0.0, atol=1e-5)
    assert result.clean.texts[1] != result.corrupted.texts[1]


OPTIONS = [
    dict(site="heads", positions=[1, -1], metric="logprob"),
    dict(site="layer_output", positions=[0, 2, -1], metric="prob"),
    dict(site="attention_output", positions=[3], metric="logit_diff"),
]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: f"{o['site']}-{o['metric']}")
def test_patch_options_match_transformers(session, hf, answer_foil, options):
    # Per-head cells, some positions, each metric: held to the same sweep in transformers.
    answer, foil = answer_foil
    result = session.patch(CLEAN, CORRUPTED, ANSWER, FOIL, **options).result(timeout=300)
    site = {"heads": "attention_head_outputs"}.get(options["site"], options["site"])
    clean_metric, corrupted_metric, patched = _hf_patch(
        hf, site, answer, foil, positions=options["positions"], metric=options["metric"]
    )
    assert result.site == site and result.metric == options["metric"]
    count = len(result.clean)
    assert result.positions == tuple(sorted(p % count for p in options["positions"]))
    np.testing.assert_allclose([result.clean_metric, result.corrupted_metric], [clean_metric, corrupted_metric], **TOL)
    np.testing.assert_allclose(result.patched, patched, **TOL)
    frame = result.to_pandas()
    assert len(frame) == result.patched.size
    assert list(frame.columns[:2]) == ["layer", "head" if result.per_head else "position"]
    np.testing.assert_allclose(frame["effect"].to_numpy(), result.effect.reshape(-1))


def test_causal_tracing_matches_transformers(session, hf, answer_foil):
    # Causal tracing: no corrupted prompt; the subject's embeddings get seeded noise, the
    # same draw in every request of the sweep and in transformers.
    answer, _ = answer_foil
    subject = (1, 3)
    result = session.patch(CLEAN, None, ANSWER, metric="prob", subject=subject, noise=3.0, seed=7).result(timeout=300)
    clean_metric, corrupted_metric, patched = _hf_patch(
        hf, "layer_output", answer, None, metric="prob", noise=(subject, 3.0, 7)
    )
    assert (result.subject, result.noise, result.seed, result.foil) == (subject, 3.0, 7, None)
    assert result.corrupted.ids == result.clean.ids
    np.testing.assert_allclose([result.clean_metric, result.corrupted_metric], [clean_metric, corrupted_metric], **TOL)
    np.testing.assert_allclose(result.patched, patched, **TOL)
    # Before the subject the noise has not arrived: those cells are the corrupted run.
    np.testing.assert_allclose(result.effect[:, 0], 0.0, atol=1e-4)
    np.testing.assert_allclose(result.effect[-1, -1], 1.0, atol=1e-4)
    again = session.patch(CLEAN, None, ANSWER, metric="prob", subject=subject, seed=7).result(timeout=300)
    devices.assert_same_run(again.patched, result.patched)
    other = session.patch(CLEAN, None, ANSWER, metric="prob", subject=subject, seed=8).result(timeout=300)
    assert other.corrupted_metric != result.corrupted_metric


def test_chunked_sweep_matches_one_chunk(session):
    # A sweep cut into requests of 3 cells gives the same map as one of 64.
    whole = session.patch(CLEAN, CORRUPTED, ANSWER, FOIL).result(timeout=300)
    cut = session.request(
        lambda engine: patch(engine, CLEAN, CORRUPTED, ANSWER, FOIL, chunk=3), key="patch-chunks"
    ).result(timeout=300)
    assert cut.requests == 1 + -(-whole.effect.size // 3) > whole.requests
    np.testing.assert_allclose(cut.patched, whole.patched, atol=1e-5)


def _hf_ablated(hf, heads):
    model, tokenizer = hf.model, hf.tokenizer
    head_dim = model.config.hidden_size // model.config.num_attention_heads
    hooks = []
    for layer, head in heads:

        def zero(m, args, head=head):
            x = args[0].clone()
            x[..., head * head_dim : (head + 1) * head_dim] = 0
            return (x, *args[1:])

        hooks.append((_get(hf.attention(layer), hf.out_proj), "pre", zero))
    return _hf_run(model, _ids(tokenizer, CLEAN), hooks)


def test_ablated_logits_match_transformers(session, hf):
    def run(engine):
        heads = check_heads(engine, HEADS)
        with engine.trace(CLEAN, temperature=0.0, max_tokens=1):
            ablate_heads(engine, heads)
            logits = engine.logits.save()
        return logits

    logits = session.request(run, key="ablate").result(timeout=120)
    expected = _hf_ablated(hf, HEADS)
    torch.testing.assert_close(logits[0, -1].float().cpu(), expected.cpu(), **TOL)
    assert not torch.allclose(expected, _hf_run(hf.model, _ids(hf.tokenizer, CLEAN), []), atol=1e-3)


def test_ablation_per_layer_between_reads(session, hf):
    # The prompt request's way: read each layer, ablating just before its head outputs.
    def run(engine):
        heads = check_heads(engine, HEADS)
        with engine.trace(CLEAN, temperature=0.0, max_tokens=1):
            streams = list().save()
            for layer in range(engine.num_layers):
                streams.append(engine.layers[layer].layer_input)
                ablate_heads(engine, heads, layer=layer)
                streams.append(engine.layers[layer].self_attn.attention_head_outputs)
            logits = engine.logits.save()
        return streams, logits

    streams, logits = session.request(run, key="ablate-layers").result(timeout=120)
    torch.testing.assert_close(logits[0, -1].float().cpu(), _hf_ablated(hf, HEADS).cpu(), **TOL)
    assert torch.all(streams[3][0, :, [2, 3]] == 0) and torch.all(streams[1][0, :, 1] == 0)


def test_prompt_request_ablates(session, hf):
    # The explorer's own request: its model prediction and its last lens row are the
    # ablated run's, held to transformers with the same heads zeroed by hooks.
    result = session.prompt(CLEAN, ablate=HEADS, key="ablated-prompt").result(timeout=120)
    ablated = torch.softmax(_hf_ablated(hf, HEADS), dim=-1)
    top = ablated.topk(5)
    assert result.ablate == tuple(sorted(HEADS))
    np.testing.assert_array_equal(result.lens.model_top_ids, top.indices.cpu().numpy())
    np.testing.assert_allclose(result.lens.model_top_probs, top.values.cpu().numpy(), atol=1e-5)
    np.testing.assert_array_equal(result.lens.top_ids[-1, -1], top.indices.cpu().numpy())
    clean = session.prompt(CLEAN, key="clean-prompt").result(timeout=120)
    assert not np.allclose(clean.lens.model_top_probs, result.lens.model_top_probs, atol=1e-4)
    # Its second invoke is the clean run: the change of the clean top-k, as transformers has it.
    clean_probs = torch.softmax(_hf_run(hf.model, _ids(hf.tokenizer, CLEAN), []), dim=-1)
    delta, top = result.ablation, clean_probs.topk(5)
    assert clean.ablation is None and delta.heads == tuple(sorted(HEADS))
    np.testing.assert_array_equal(delta.ids, top.indices.cpu().numpy())
    np.testing.assert_allclose(delta.clean, top.values.cpu().numpy(), atol=1e-5)
    np.testing.assert_allclose(delta.ablated, ablated[top.indices].cpu().numpy(), atol=1e-5)
    np.testing.assert_array_equal(delta.ablated_ids, ablated.topk(5).indices.cpu().numpy())
    with pytest.raises(InterventionError, match="out of range"):
        session.prompt(CLEAN, ablate=[(99, 0)], key="bad-ablate").result(timeout=120)
    assert session.prompt(CLEAN, ablate=HEADS[:1], key="bad-ablate").result(timeout=120).ablate == (HEADS[0],)


def test_ablation_delta_matches_transformers(session, hf):
    delta = session.ablation(CLEAN, HEADS).result(timeout=120)
    clean = torch.softmax(_hf_run(hf.model, _ids(hf.tokenizer, CLEAN), []), dim=-1)
    ablated = torch.softmax(_hf_ablated(hf, HEADS), dim=-1)
    top = clean.topk(5)
    assert delta.heads == tuple(sorted(HEADS))
    np.testing.assert_array_equal(delta.ids, top.indices.cpu().numpy())
    np.testing.assert_allclose(delta.clean, top.values.cpu().numpy(), atol=1e-5)
    np.testing.assert_allclose(delta.ablated, ablated[top.indices].cpu().numpy(), atol=1e-5)
    np.testing.assert_allclose(delta.top1_delta, float(ablated[top.indices[0]] - top.values[0]), atol=1e-5)
    np.testing.assert_array_equal(delta.ablated_ids, ablated.topk(5).indices.cpu().numpy())


def test_pair_lens_matches_transformers(session, hf, answer_foil):
    pair = session.compare(CLEAN, CORRUPTED, ANSWER, FOIL).result(timeout=120)
    answer, foil = answer_foil
    for text, lens, diff in ((CLEAN, pair.first, pair.first_diff), (CORRUPTED, pair.second, pair.second_diff)):
        streams = {}
        hooks = [
            (block, "post", lambda m, a, o, i=i: streams.__setitem__(i, _first(o))) for i, block in enumerate(hf.blocks)
        ]
        _hf_run(hf.model, _ids(hf.tokenizer, text), hooks)
        with torch.no_grad():
            logits = torch.stack([hf.lens(streams[i])[0] for i in sorted(streams)])
        np.testing.assert_allclose(diff, (logits[..., answer] - logits[..., foil]).cpu().numpy(), **TOL)
        top = torch.softmax(logits, dim=-1).topk(5, dim=-1)
        np.testing.assert_array_equal(lens.top_ids, top.indices.cpu().numpy())
        np.testing.assert_allclose(lens.top_probs, top.values.cpu().numpy(), atol=1e-5)
    np.testing.assert_array_equal(pair.difference, pair.first_diff - pair.second_diff)
    frame = pair.to_pandas()
    assert len(frame) == pair.difference.size
    np.testing.assert_allclose(frame["difference"].to_numpy(), pair.difference.reshape(-1))
    assert np.all(pair.difference[:, 0] == 0)  # the shared first token


BAD = [
    (
        lambda s: s.patch(CLEAN, "The Louvre Museum is in", ANSWER, FOIL),
        "the clean prompt is 5 tokens and the corrupted prompt 7 tokens",
    ),
    (lambda s: s.patch(CLEAN, CORRUPTED, " Parisian Rome", FOIL), "the answer ' Parisian Rome' is"),
    (lambda s: s.patch(CLEAN, CORRUPTED, ANSWER, ANSWER), "the answer and the foil are the same token"),
    (
        lambda s: s.patch(CLEAN, CORRUPTED, ANSWER, FOIL, site="mlp_input"),
        "unknown site 'mlp_input'; the sites are layer_output, attention_output, mlp_output, attention_head_outputs, heads",
    ),
    (
        lambda s: s.patch(CLEAN, CORRUPTED, ANSWER, FOIL, positions=[5]),
        "positions are token positions of the prompt, a non-empty list of distinct integers in 0..4",
    ),
    (lambda s: s.patch(CLEAN, CORRUPTED, ANSWER, FOIL, positions=[]), "positions are token positions"),
    (lambda s: s.patch(CLEAN, CORRUPTED, ANSWER, FOIL, metric="kl"), "unknown metric 'kl'; the metrics are"),
    (lambda s: s.patch(CLEAN, CORRUPTED, ANSWER), "the metric logit_diff needs a foil"),
    (lambda s: s.patch(CLEAN, None, ANSWER, FOIL, subject=(3, 9)), "subject is the span of the prompt"),
    (lambda s: s.patch(CLEAN, None, ANSWER, FOIL), "without a corrupted prompt, patching is causal tracing"),
    (lambda s: s.patch(CLEAN, CORRUPTED, ANSWER, FOIL, subject=(0, 1)), "subject= is for causal tracing"),
    (lambda s: s.patch(CLEAN, None, ANSWER, FOIL, subject=(0, 1), noise=-1), "noise is how many"),
    (lambda s: s.ablation(CLEAN, [(2, 0)]), "layer 2 is out of range: this model has layers 0..1"),
    (lambda s: s.ablation(CLEAN, [(0, 4)]), "head 4 is out of range: each layer has heads 0..3"),
    (lambda s: s.ablation(CLEAN, [(0,)]), "ablate takes (layer, head) pairs of integers, got (0,)"),
    (lambda s: s.compare(CLEAN, "", ANSWER, FOIL), "the prompt is empty"),
]


@pytest.mark.parametrize("call, message", BAD, ids=[m[:24] for _, m in BAD])
def test_bad_input_then_a_good_request(session, call, message):
    with pytest.raises(ValueError) as error:
        call(session).result(timeout=120)
    assert message in str(error.value)
    if isinstance(error.value, InterventionError):
        assert str(error.value).startswith(message)
    result = session.patch(CLEAN, CORRUPTED, ANSWER, FOIL, site="attention_head_outputs").result(timeout=300)
    assert result.effect.shape == (2, 4)
