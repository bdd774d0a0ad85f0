"""A pattern is recomputed a block of query rows at a time and pooled block by block.

`pattern_payload` never holds a layer's whole ``[heads, tokens, tokens]``: these tests
hold what it ships (exact cells, block maxima, a window, thumbnails) to the same
pooling of the whole pattern, with the row blocks forced small so that every path
crosses many of them; and `recompute_scores`' rows to the whole scores' rows, for
each way a layer scores (grouped kv heads, softcap, ALiBi, a sliding window).
The engine's own patterns are held to transformers in tests/test_session.py.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from nnterp_widgets.components.vllm.attention import recompute_scores
from nnterp_widgets.requests import attention as attention_requests
from nnterp_widgets.requests.attention import QUANT, THUMBNAIL_SIDE, mean_pool, pattern_payload, rows_at_once


def _max_pool(pattern: np.ndarray, block: int) -> np.ndarray:
    heads, count, _ = pattern.shape
    cells = -(-count // block)
    padded = np.zeros((heads, cells * block, cells * block), dtype=pattern.dtype)
    padded[:, :count, :count] = pattern
    return padded.reshape(heads, cells, block, cells, block).max(axis=(2, 4))


def _rows_of(whole, queries, keys, start, stop):
    """What `probability_rows` gives, from a whole causal pattern (``whole`` stands for
    the block): its rows over the keys asked for, which must hold every key these rows
    weigh (the payload cuts the keys after the rows' last query)."""
    seen = keys.shape[2]
    assert queries.shape[2] == whole.shape[-1] and stop <= seen <= whole.shape[-1]
    assert not whole[0, :, start:stop, seen:].any(), "a key these rows weigh was cut"
    return whole[0, :, start:stop, :seen].clone()


def _causal(heads: int, tokens: int, seed: int) -> torch.Tensor:
    """A causal pattern ``[1, heads, tokens, tokens]`` of random scores."""
    scores = torch.randn(1, heads, tokens, tokens, generator=torch.Generator().manual_seed(seed))
    later = torch.ones(tokens, tokens, dtype=torch.bool).triu_(1)
    return torch.softmax(scores.masked_fill(later, float("-inf")), dim=-1)


@pytest.fixture(params=[None, 1], ids=["one block of rows", "row blocks forced small"])
def rows(request, monkeypatch):
    """The payload as computed on the engine, with the row blocks as large as they come
    or as small as they can be (one pooling block of rows at a time)."""
    monkeypatch.setattr(attention_requests, "probability_rows", _rows_of)
    if request.param is not None:
        monkeypatch.setattr(attention_requests, "ROWS_BYTES", request.param)
    return request.param


def _payload(probabilities, **options):
    heads, tokens = probabilities.shape[1], probabilities.shape[-1]
    queries = keys = torch.zeros(1, heads, tokens, 1)
    return pattern_payload(probabilities, queries, keys, **options)


def test_every_cell_and_the_thumbnails_pool_like_the_grid(rows):
    probabilities = _causal(3, 150, seed=0)
    quantized, thumbnails = _payload(probabilities)
    assert (
        isinstance(quantized, np.ndarray)
        and quantized.dtype == np.uint8
        and quantized.shape == (3, 150, 150)
        and thumbnails.shape == (3, 50, 50)
    )
    for head in range(3):
        want = probabilities[0, head].numpy()
        assert np.abs(quantized[head] / QUANT - want).max() <= 0.5 / QUANT + 1e-7
        np.testing.assert_allclose(thumbnails[head], mean_pool(want, THUMBNAIL_SIDE), atol=1e-6)


@pytest.mark.parametrize("tokens", [11, 200])
def test_pooled_cells_are_the_block_maximum_and_a_window_is_exact(rows, tokens):
    probabilities = _causal(2, tokens, seed=1)
    quantized, thumbnails = _payload(probabilities, block=3)
    cells = -(-tokens // 3)
    assert quantized.shape == (2, cells, cells)  # the last block of a side holds what is left
    want = _max_pool(probabilities[0].numpy(), 3)
    assert np.abs(quantized / QUANT - want).max() <= 0.5 / QUANT + 1e-7
    for head in range(2):
        np.testing.assert_allclose(
            thumbnails[head], mean_pool(probabilities[0, head].numpy(), THUMBNAIL_SIDE), atol=1e-6
        )
    window, _ = _payload(probabilities, window=(2, 6, 5, 11))
    np.testing.assert_array_equal(window, np.rint(probabilities[0, :, 2:6, 5:11].numpy() * QUANT))
    row, _ = _payload(probabilities, window=(tokens - 1, tokens, 0, tokens))  # a token's row
    np.testing.assert_array_equal(row, np.rint(probabilities[0, :, -1:].numpy() * QUANT))


def test_a_block_of_rows_fits_its_bytes_in_whole_pooling_blocks():
    # 32 heads at 32,768 tokens: 64 rows (a pooling block of 64) are 256 MiB of float32.
    on_gpu = attention_requests.rows_bytes_on("cuda", free=80 * 2**30)
    assert rows_at_once(32, 32_768, 64, on_gpu) == 256
    assert rows_at_once(32, 32_768, 64, on_gpu) * 32 * 32_768 * 4 <= attention_requests.GPU_ROWS_BYTES
    assert rows_at_once(32, 16_384, 32, 256 * 2**20) == 128 and 128 % 32 == 0
    assert rows_at_once(32, 32_768, 64) == 64  # the CPU's blocks: never less than one pooling block
    assert rows_at_once(2, 10, 1) >= 10  # a short prompt: one block holds every row
    assert rows_at_once(32, 10**6, 7) == 7
    assert attention_requests.rows_bytes_on(torch.device("cpu")) == attention_requests.ROWS_BYTES < on_gpu
    # a GPU that vLLM has nearly filled gets smaller blocks (a share of what is free), never under the CPU's
    assert attention_requests.rows_bytes_on("cuda", free=2**30) == 2**30 // attention_requests.FREE_SHARE
    assert attention_requests.rows_bytes_on("cuda", free=0) == attention_requests.ROWS_BYTES


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"softcap": 5.0},
        {"alibi_slopes": torch.tensor([0.5, 0.25, 0.125, 0.0625])},
        {"sliding_window": 3},
    ],
    ids=["causal", "softcap", "alibi", "sliding window"],
)
def test_score_rows_are_the_whole_scores_rows(options):
    generator = torch.Generator().manual_seed(2)
    query = torch.randn(9, 4, 8, generator=generator)
    key = torch.randn(9, 2, 8, generator=generator)  # two query heads a kv head
    whole = recompute_scores(query, key, 0.3, **options)
    repeated = key.repeat_interleave(2, dim=1)
    plain = torch.einsum("qhd,khd->hqk", query * 0.3, repeated)
    visible = torch.isfinite(whole)
    assert not visible[:, 0, 1:].any() and visible[:, 8, 8].all()  # causal
    if not options:
        torch.testing.assert_close(whole[visible], plain[visible])  # query head h reads kv head h // 2
    for start, stop in [(0, 1), (2, 5), (5, 9)]:
        part = recompute_scores(query, key, 0.3, rows=(start, stop), **options)
        torch.testing.assert_close(part, whole[:, start:stop], atol=1e-6, rtol=1e-6)
        # the keys cut after the rows' last query (what the shipped pattern scores): the same columns
        cut = recompute_scores(query, key[:stop], 0.3, rows=(start, stop), **options)
        torch.testing.assert_close(cut, whole[:, start:stop, :stop], atol=1e-6, rtol=1e-6)


def test_the_memory_estimate_of_a_shipped_pattern_is_one_block_of_rows():
    """The memory guard's estimate: the shipped pattern of an 8B shape at 32,768 tokens
    is one block of rows and the layer's queries and keys (under 2 GB), where the whole
    pattern read by `Session.patterns` is three copies of 128 GiB; on a GPU the forward's
    activations are vLLM's own and are not counted."""
    from nnterp_widgets.session.memory import request_bytes

    llama = SimpleNamespace(
        num_heads=32, num_kv_heads=8, head_dim=128, hidden_size=4096, intermediate_size=14336, vocab_size=128256
    )
    shipped = request_bytes(llama, 32_768, row_blocks=1, forward=False)
    assert 0.5e9 < shipped < 2e9
    # a GPU's blocks are larger (fewer launches): three copies of 1 GiB and the reads
    roomy = request_bytes(llama, 32_768, row_blocks=1, forward=False, device="cuda", free=80 * 2**30)
    assert 3 * 2**30 < roomy < 4.5e9
    full = request_bytes(llama, 32_768, row_blocks=1, forward=False, device="cuda", free=2**30)
    assert full == shipped < roomy  # a nearly full GPU: the smallest blocks, as on the CPU
    assert request_bytes(llama, 32_768, patterns=1, forward=False) == 3 * 32 * 32_768**2 * 4
    assert request_bytes(llama, 32_768, row_blocks=1) - shipped == 6 * 32_768 * 14336 * 4  # the CPU's activations
