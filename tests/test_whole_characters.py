"""A character split over byte-level tokens (CJK, emoji, accents) is said once, by the
token that completes it: no token's text is "\\ufffd" where the tokens decode cleanly
together, and the texts still join to the prompt. A tokenizer over UTF-8 bytes stands in
here; tests/test_trained_model.py checks SmolLM2's own tokenizer through a request."""

from __future__ import annotations

import pytest

from nnterp_widgets.figures import show_token
from nnterp_widgets.requests.common import REPLACEMENT, whole_characters


class ByteTokenizer:
    """One token a UTF-8 byte, decoded as a byte-level BPE tokenizer decodes."""

    def decode(self, ids) -> str:
        return bytes(ids).decode("utf-8", errors="replace")


def split(text: str) -> tuple[tuple, tuple]:
    ids = tuple(text.encode())
    tokenizer = ByteTokenizer()
    return ids, whole_characters(tokenizer, ids, tuple(tokenizer.decode([i]) for i in ids))


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("日本", ("", "", "日", "", "", "本")),
        (" a😀b", (" ", "a", "", "", "", "😀", "b")),
        ("é!", ("", "é", "!")),
        ("plain", tuple("plain")),
    ],
)
def test_each_character_is_said_once_by_the_token_that_completes_it(text, said):
    ids, texts = split(text)
    assert texts == said
    assert "".join(texts) == text
    assert not any(REPLACEMENT in shown for shown in map(show_token, texts))


def test_a_piece_never_completed_stays_as_the_tokenizer_said_it():
    ids = tuple("日".encode())[:2] + tuple(b"ab")  # the character's last byte is missing
    tokenizer = ByteTokenizer()
    texts = tuple(tokenizer.decode([i]) for i in ids)
    assert whole_characters(tokenizer, ids, texts) == texts


class CountingTokenizer:
    """Token ``i``'s text is ``t<i>``; counts the decodes."""

    def __init__(self):
        self.decoded = []

    def decode(self, ids) -> str:
        self.decoded.extend(ids)
        return "".join(f"t{i}" for i in ids)


def test_a_grid_of_ids_reads_as_nested_texts_each_id_decoded_once():
    import numpy as np
    import torch

    from nnterp_widgets.requests.common import texts_of, token_text, tokens_of

    class Model:
        tokenizer = CountingTokenizer()

    grid = np.array([[[3, 1, 3], [7, 7, 1]], [[1, 2, 3], [9, 0, 9]]])
    texts = texts_of(Model, torch.tensor(grid))
    assert texts == tuple(tuple(tuple(f"t{i}" for i in row) for row in layer) for layer in grid.tolist())
    assert sorted(Model.tokenizer.decoded) == [0, 1, 2, 3, 7, 9]  # once each, the repeats looked up
    assert texts_of(Model, [[40, 3]]) == (("t40", "t3"),)  # past the table's end: it grows
    assert texts_of(Model, np.zeros((0, 5), np.int64)) == ()
    assert token_text(Model.tokenizer)(40) == "t40" and token_text(Model.tokenizer)(41) == "t41"
    assert tokens_of(Model, [9, 41, 2]).texts == ("t9", "t41", "t2")
    assert sorted(Model.tokenizer.decoded) == [0, 1, 2, 3, 7, 9, 40, 41]
