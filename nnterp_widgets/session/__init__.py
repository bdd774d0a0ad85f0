"""The session layer: owns the engine, serialises and coalesces the widgets' requests."""

from .panels import AttentionPanel, LensPanel, PromptResult, Tokens, ValueSummary
from .probe import ProbeError, ResultTooLarge
from .session import Session
from .status import IDLE, State, Status
from .worker import Busy, EngineDied, Superseded

__all__ = [
    "IDLE", "AttentionPanel", "Busy", "EngineDied", "LensPanel", "ProbeError", "PromptResult", "ResultTooLarge",
    "Session", "State", "Status", "Superseded", "Tokens", "ValueSummary",
]
