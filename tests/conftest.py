"""Engines for the tests: real vLLM (CPU backend) + real nnsight, on tiny checkpoints.

One engine per test module (module-scoped fixtures), closed when the module is done
so that the next module's engine has the machine to itself.
"""

from __future__ import annotations

import pytest

from nnterp_widgets.checkpoints import checkpoint

ENGINE_KWARGS = dict(dtype="float32", gpu_memory_utilization=0.3, max_model_len=512)


def open_engine(family: str):
    from nnterp_widgets import StandardizedVLLM

    return StandardizedVLLM(checkpoint(family), **ENGINE_KWARGS)


@pytest.fixture(scope="module")
def engine_factory():
    """Opens engines for a module and closes them all when it ends."""
    opened = []

    def make(family: str):
        engine = open_engine(family)
        opened.append(engine)
        return engine

    yield make
    for engine in opened:
        engine.close()


def open_session(family: str, max_model_len: int = 64):
    """A session on a tiny checkpoint, engine open; short prompts keep tests quick."""
    from nnterp_widgets.session import Session

    settings = {k: v for k, v in ENGINE_KWARGS.items() if k != "max_model_len"}
    return Session.open(checkpoint(family), progress=False, max_model_len=max_model_len, **settings).wait()
