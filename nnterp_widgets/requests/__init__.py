"""The questions the engine answers: one module each, holding the engine-side function
(it takes a `StandardizedVLLM` and runs on the session's worker) beside the result type
it returns.

    from nnterp_widgets.requests import run_prompt, PromptResult
    result = run_prompt(model, "The Eiffel Tower is in the city of")   # on an engine

A script asks through `Session` (`session.prompt(...)` is a `Job[PromptResult]`); these
functions are what the session's worker runs. Results are immutable, hold numpy arrays
on the CPU, and keep token text as data.

A question that batches (`batches`: ``session.each(prompts)``) is split in three, so that
one prompt and many run the same code: ``*_plan`` (the checks, before any trace),
``*_reads`` (inside the prompt's invoke) and ``*_result`` (the result, after); its
`Question` (``LENS_QUESTION``, ...) pairs the reads with the result and says which
prompts can share one registration.
"""

from .attention import (
    PATTERN_SIDE,
    AttentionPattern,
    Patterns,
    PatternStats,
    STATS_QUESTION,
    stats_plan,
    stats_reads,
    stats_result,
    check_layers,
    pattern_block,
    rows_at_once,
    rows_bytes_on,
    run_attention,
    run_attention_row,
    run_patterns,
)
from .attribution import (
    ATTRIBUTION_QUESTION,
    Attribution,
    attribute,
    attribution_plan,
    attribution_reads,
    attribution_result,
)
from .batches import Results, check_batch, per_prompt, run_each
from .common import (
    LENS_K,
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
    generate_each,
)
from .heads import ROLES_QUESTION, HeadRoles, head_roles, induction_probe, roles_plan, roles_reads, roles_result
from .kept import KEPT_BYTES, KEPT_PROMPTS, keep_bytes, run_kept_lens, stream_key
from .lens import (
    LENS_QUESTION,
    LensGrid,
    lens_bytes,
    lens_plan,
    lens_reads,
    lens_result,
    lens_shared,
    lens_window,
    run_lens,
)
from .prompt import (
    PROMPT_QUESTION,
    PromptResult,
    prompt_bytes,
    prompt_plan,
    prompt_reads,
    prompt_result,
    prompt_shared,
    run_prompt,
)
from .question import Question, as_given
from .sites import SITES, AblationDelta, InterventionError
from .values import (
    VECTOR_QUESTION,
    ValueSummary,
    check_reduce,
    run_value,
    value_bytes,
    vector_plan,
    vector_reads,
    vector_result,
)

__all__ = [
    "Question",
    "ATTRIBUTION_QUESTION",
    "LENS_QUESTION",
    "PROMPT_QUESTION",
    "ROLES_QUESTION",
    "STATS_QUESTION",
    "VECTOR_QUESTION",
    "LENS_K",
    "lens_bytes",
    "prompt_bytes",
    "PatternStats",
    "stats_plan",
    "stats_reads",
    "stats_result",
    "check_reduce",
    "Results",
    "as_given",
    "check_batch",
    "per_prompt",
    "run_each",
    "attribution_plan",
    "attribution_reads",
    "attribution_result",
    "generate_each",
    "roles_plan",
    "roles_reads",
    "roles_result",
    "lens_plan",
    "lens_shared",
    "lens_reads",
    "lens_result",
    "prompt_plan",
    "prompt_shared",
    "prompt_reads",
    "prompt_result",
    "vector_plan",
    "vector_reads",
    "vector_result",
    "FLOOR",
    "GENERATE_TOKENS",
    "KEPT_BYTES",
    "KEPT_PROMPTS",
    "MAX_RESULT_BYTES",
    "MODES",
    "PATTERN_SIDE",
    "pattern_block",
    "rows_at_once",
    "rows_bytes_on",
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
