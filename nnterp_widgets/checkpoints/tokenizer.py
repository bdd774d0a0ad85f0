"""A byte-level BPE tokenizer trained here, on `CORPUS`, so no hub is needed."""

from __future__ import annotations

from pathlib import Path

from .corpus import CORPUS

#: The one special token: beginning, end and padding, as GPT-2 and Qwen2 use it.
SPECIAL = "<|endoftext|>"
VOCAB_SIZE = 1024


def train_tokenizer(vocab_size: int = VOCAB_SIZE):
    """A `PreTrainedTokenizerFast` whose tokens are the corpus's words."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[SPECIAL],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # Repeated so that every word of the corpus is frequent enough to be merged whole.
    tokenizer.train_from_iterator([CORPUS] * 4, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=SPECIAL,
        eos_token=SPECIAL,
        pad_token=SPECIAL,
        unk_token=SPECIAL,
    )


def padded(tokenizer, vocab_size: int):
    """``tokenizer`` with its vocabulary filled up to ``vocab_size`` ids.

    A real model's vocabulary (Qwen2's 151,936) is far more than the corpus trains. The
    extra ids are byte-level tokens `` tok<id>`` with no merge reaching them: a prompt
    never encodes to them, but the lens and the sampler may rank them, and they decode.
    """
    import json

    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    state = json.loads(tokenizer.backend_tokenizer.to_str())
    vocab = state["model"]["vocab"]
    table = _byte_chars()
    for index in range(len(vocab), vocab_size):
        vocab["".join(table[b] for b in f" tok{index}".encode())] = index
    backend = Tokenizer.from_str(json.dumps(state))
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token=SPECIAL, eos_token=SPECIAL, pad_token=SPECIAL, unk_token=SPECIAL
    )


def _byte_chars() -> dict[int, str]:
    """GPT-2's byte-level table: byte -> the printable character standing for it."""
    printable = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {byte: chr(char) for byte, char in zip(printable, chars, strict=True)}


def save_tokenizer(directory: Path, vocab_size: int | None = None) -> int:
    """Write the tokenizer into ``directory`` (padded to ``vocab_size`` ids if given);
    return its vocabulary size."""
    tokenizer = train_tokenizer()
    if vocab_size is not None and vocab_size > len(tokenizer):
        tokenizer = padded(tokenizer, vocab_size)
    tokenizer.save_pretrained(str(directory))
    return len(tokenizer)
