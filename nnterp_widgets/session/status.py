"""`Status`: what the session tells the widgets, and what every widget shows.

One vocabulary from the engine's worker to the page: a `State` (idle, busy, error) and a
message. The session reports its engine's life (starting, ready, reopening after its
process died, failed); each request's own outcome is its future's.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["IDLE", "State", "Status"]


class State(str, Enum):
    IDLE = "idle"
    BUSY = "busy"
    ERROR = "error"


@dataclass(frozen=True)
class Status:
    """A state and its message; ``Status("busy", "...")`` takes the state's name too."""

    state: State = State.IDLE
    message: str = ""

    def __post_init__(self) -> None:
        # A string naming no state raises ValueError here, before any widget shows it.
        object.__setattr__(self, "state", State(self.state))
        object.__setattr__(self, "message", str(self.message or ""))

    def to_json(self) -> dict:
        """The form the front end reads: ``{"state": "busy", "message": "..."}``."""
        return {"state": self.state.value, "message": self.message}

    @property
    def text(self) -> str:
        """One plain-text line: ``"busy… message"``, ``"error: message"`` or the message."""
        if self.state is State.BUSY:
            return f"busy… {self.message}".rstrip()
        if self.state is State.ERROR:
            return f"error: {self.message}" if self.message else "error"
        return self.message


IDLE = Status()

#: The engine's life as the session reports it.
STARTING = Status(State.BUSY, "starting the engine")
READY = Status(State.IDLE, "engine ready")
