"""Branching: from a generation's step, force another token and continue, one request.

    generation = session.generate("The capital of France is", max_tokens=8).result()
    branch = session.branch(generation, step=1, token=" not").result()
    branch.original.text, branch.branched.text    # the two continuations side by side

Step ``k`` of the original wrote some token; the branch writes ``token`` there instead
(typically one of that step's top-k) and generates the rest greedily, as many tokens as
the original wrote after it. The branched generation starts from the prompt's and the
first ``k`` written tokens' ids (not their text, which could re-tokenize differently), so
its first ``k`` steps are the original's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..requests.generation import GenerationError, GenerationResult, generate
from ..requests.sites import InterventionError
from ..requests.common import one_token
from ..requests.tables import stacked

STEP_OUT_OF_RANGE = "step {step} is out of range: this generation has steps 0..{last}"
SAME_AS_WRITTEN = "step {step} already wrote {text!r}: pick another token to branch on"


@dataclass(frozen=True)
class BranchResult:
    """A generation (``original``) and its branch: at ``step`` the token ``forced`` was
    written instead of the original's, then ``branched`` continues from there.

    ``branched`` is the generation from the prompt, the original's first ``step`` tokens
    and the forced one: its steps are those after the forced token.
    """

    original: GenerationResult
    step: int
    forced: int
    forced_text: str
    branched: GenerationResult

    @property
    def continuation(self) -> tuple[str, ...]:
        """The branch's written tokens from ``step`` on: the forced one, then the rest."""
        return (self.forced_text, *self.branched.generated.texts)

    @property
    def original_continuation(self) -> tuple[str, ...]:
        """The original's written tokens from ``step`` on."""
        return self.original.generated.texts[self.step :]

    def to_pandas(self):
        """Both generations' lens tables (`GenerationResult.to_pandas`), ``run``
        ``"original"`` or ``"branched"``."""
        return stacked({"original": self.original.to_pandas(), "branched": self.branched.to_pandas()}, "run")


def branch(model, original: GenerationResult, step: int, token: Any, max_tokens: int | None = None) -> BranchResult:
    """One request: ``original`` with ``token`` (its text, one token, or its id) forced at
    ``step``, continued greedily for ``max_tokens`` (default: as many as the original
    wrote after that step, at least one)."""
    count = len(original.steps)
    if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step < count:
        raise GenerationError(STEP_OUT_OF_RANGE.format(step=step, last=count - 1))
    forced, forced_text = one_token(model, token, "forced token", InterventionError)
    if forced == original.steps[step].token:
        raise GenerationError(SAME_AS_WRITTEN.format(step=step, text=forced_text))
    ids = list(original.tokens.ids[: original.prompt_length + step]) + [forced]
    rest = max(1, count - step - 1) if max_tokens is None else max_tokens
    branched = generate(model, ids, rest)
    return BranchResult(original, step, forced, forced_text, branched)
