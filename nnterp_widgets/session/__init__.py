"""The session layer: owns the engine, serialises and coalesces the widgets' requests."""

from .generation import GenerationError, GenerationResult, GenerationStep, LensModes, Target
from .intervention_results import AblationDelta, PairLens, PatchResult
from .interventions import InterventionError
from .panels import AttentionPanel, LensPanel, PromptResult, Tokens, ValueSummary
from .probe import ProbeError, ResultTooLarge
from .session import Session
from .status import IDLE, State, Status
from .worker import Busy, EngineDied, Superseded

__all__ = [
    "IDLE",
    "AblationDelta",
    "AttentionPanel",
    "Busy",
    "EngineDied",
    "GenerationError",
    "GenerationResult",
    "GenerationStep",
    "InterventionError",
    "LensModes",
    "LensPanel",
    "PairLens",
    "PatchResult",
    "ProbeError",
    "PromptResult",
    "ResultTooLarge",
    "Session",
    "State",
    "Status",
    "Superseded",
    "Target",
    "Tokens",
    "ValueSummary",
]
