"""The error a standard value raises when this engine cannot serve it."""

from __future__ import annotations


class Unavailable(RuntimeError):
    """``<path>.<name> is not available: <reason>``.

    A `RuntimeError`, so that inside a trace, where the block runs in the engine's
    worker, it arrives as nnsight's `RuntimeError` whose first line starts
    ``Unavailable: ``.
    """

    def __init__(self, path: str, name: str, reason: str) -> None:
        super().__init__(f"{path}.{name} is not available: {reason}")
        self.path = path
        self.name = name
        self.reason = reason

    def __reduce__(self):
        # Crosses from the worker as a pickle; keep the three parts, not the message.
        return (type(self), (self.path, self.name, self.reason))
