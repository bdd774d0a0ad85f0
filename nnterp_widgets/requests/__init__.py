"""The questions the engine answers: one module each, holding the engine-side function
(it takes a `StandardizedVLLM` and runs on the session's worker) beside the result type
it returns.

    from nnterp_widgets.requests import run_prompt, PromptResult
    result = run_prompt(model, "The Eiffel Tower is in the city of")   # on an engine

A script asks through `Session` (`session.prompt(...)` is a `Job[PromptResult]`); these
functions are what the session's worker runs. Results are immutable, hold numpy arrays
on the CPU, and keep token text as data.
"""

from .attention import (
    PATTERN_SIDE,
    AttentionPattern,
    Patterns,
    check_layers,
    run_attention,
    run_attention_row,
    run_patterns,
)
from .attribution import Attribution, attribute
from .common import (
    MAX_RESULT_BYTES,
    check_prompt,
    prompt_ids,
    with_bos,
    prompt_key,
    RequestRefused,
    ResultTooLarge,
    Tokens,
    tokens_of,
)
from .contributions import FLOOR, THRESHOLD, Contributions, Route, contributions
from .generation import (
    GENERATE_TOKENS,
    MODES,
    TARGET_MODES,
    GenerationError,
    GenerationResult,
    GenerationStep,
    LensModes,
    Target,
    follow,
    generate,
)
from .heads import HeadRoles, head_roles, induction_probe
from .kept import KEPT_BYTES, KEPT_PROMPTS, keep_bytes, run_kept_lens, stream_key
from .lens import LensGrid, lens_window, run_lens
from .prompt import PromptResult, run_prompt
from .sites import SITES, AblationDelta, InterventionError
from .values import ValueSummary, run_value, value_bytes

__all__ = [
    "FLOOR",
    "GENERATE_TOKENS",
    "KEPT_BYTES",
    "KEPT_PROMPTS",
    "MAX_RESULT_BYTES",
    "MODES",
    "PATTERN_SIDE",
    "SITES",
    "TARGET_MODES",
    "THRESHOLD",
    "AblationDelta",
    "AttentionPattern",
    "Attribution",
    "Contributions",
    "GenerationError",
    "GenerationResult",
    "GenerationStep",
    "HeadRoles",
    "InterventionError",
    "LensGrid",
    "LensModes",
    "Patterns",
    "PromptResult",
    "RequestRefused",
    "ResultTooLarge",
    "Route",
    "Target",
    "Tokens",
    "ValueSummary",
    "attribute",
    "check_layers",
    "check_prompt",
    "contributions",
    "follow",
    "generate",
    "head_roles",
    "induction_probe",
    "keep_bytes",
    "lens_window",
    "prompt_ids",
    "with_bos",
    "prompt_key",
    "run_attention",
    "run_attention_row",
    "run_kept_lens",
    "run_lens",
    "run_patterns",
    "run_prompt",
    "run_value",
    "stream_key",
    "tokens_of",
    "value_bytes",
]
