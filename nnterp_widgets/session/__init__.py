"""The session layer: owns the engine, serialises and coalesces the widgets' requests."""

from .attribution import Attribution
from .branching import BranchResult
from .contributions import Contributions, Route
from .occlusion import Occlusion
from .steering import SteerResult, SteeringError
from .generation import GenerationError, GenerationResult, GenerationStep, LensModes, Target
from .heads import HeadRoles
from .intervention_results import AblationDelta, PairLens, PatchResult
from .interventions import InterventionError
from .kernel_thread import KernelThread
from .panels import AttentionPanel, LensPanel, PromptResult, Tokens, ValueSummary
from .prompt_requests import ProbeError, ResultTooLarge
from .session import Session
from .status import IDLE, State, Status
from .worker import Busy, EngineDied, Superseded

__all__ = [
    "SteeringError",
    "SteerResult",
    "Occlusion",
    "BranchResult",
    "IDLE",
    "AblationDelta",
    "AttentionPanel",
    "Attribution",
    "Contributions",
    "Route",
    "Busy",
    "EngineDied",
    "GenerationError",
    "GenerationResult",
    "GenerationStep",
    "HeadRoles",
    "InterventionError",
    "KernelThread",
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
