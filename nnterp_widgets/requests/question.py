"""What ``session.each(prompts)`` asks of every prompt: a `Question` pairs a question's
reads (run for each prompt on the engine) with the result built from them, and says which
prompts can share one registration. Each question module defines its own beside its reads::

    LENS_QUESTION = Question("lens", lens_reads, lens_result, lens_shared)
    results = run_each(model, prompts, LENS_QUESTION, prepare)     # `batches`
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Question:
    """A question `run_each` asks of every prompt, defined beside its reads.

    Args:
        kind: its name (`Results.kind`, the key of its `Results.mean`).
        reads: a module-level function, ``reads(model, *reads_args) -> dict``, run inside
            the prompt's invoke or registration (nnsight ships it by reference).
        build: ``build(model, ids, found, *build_args) -> result``, on the client.
        shared: ``shared(ids, reads_args)``: the reads' arguments as they read for any
            prompt (positions counted from the end), or None where they depend on this
            one. `REGISTER_AT` or more prompts with the same are asked through one
            registration (`StandardizedVLLM.registered`), the rest an invoke each. None:
            every prompt an invoke.
    """

    kind: str
    reads: Callable
    build: Callable
    shared: Callable[[list[int], tuple], Hashable | None] | None = None


def as_given(ids: list[int], reads_args: tuple) -> tuple:
    """``shared`` for reads whose arguments never depend on the prompt's length."""
    return reads_args
