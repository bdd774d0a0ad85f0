"""The kernel's one engine: `Session` owns it, its worker queue, its memory guard, its
status and its log; every request is a `Job`.

    session = Session.open()                       # the trained model, started in the background
    job = session.prompt("The Eiffel Tower is in the city of")
    job.result().lens                              # a PromptResult's LensGrid

What each request computes, and the result types, are in `nnterp_widgets.requests`.
"""

from ..requests import RequestRefused, ResultTooLarge
from .batch import Batch
from .job import Job, gather, resolved
from .kernel_thread import KernelThread
from .memory import MemoryRefused
from .session import Session, session_of
from .status import IDLE, State, Status
from .worker import Busy, EngineDied, Superseded

__all__ = [
    "IDLE",
    "Batch",
    "Busy",
    "EngineDied",
    "Job",
    "KernelThread",
    "MemoryRefused",
    "RequestRefused",
    "ResultTooLarge",
    "Session",
    "State",
    "Status",
    "Superseded",
    "gather",
    "resolved",
    "session_of",
]
