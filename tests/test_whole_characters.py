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
