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


def save_tokenizer(directory: Path) -> int:
    """Write the tokenizer into ``directory``; return its vocabulary size."""
    tokenizer = train_tokenizer()
    tokenizer.save_pretrained(str(directory))
    return len(tokenizer)
