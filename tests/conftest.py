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
