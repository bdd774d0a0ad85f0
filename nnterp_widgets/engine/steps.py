"""`steps`: a generation's steps inside an invoke, as ``tracer.iter`` gives them.

    with model.trace(ids, max_tokens=8) as tracer:
        with tracer.invoke(ids):
            for step in steps(8):
                ...  # reads and writes here bind to step ``step``

An invoke ships to the engine every object its code names. ``tracer`` holds the model
envoy, and with it the module tree (hundreds of envoys), so ``for step in
tracer.iter[:n]`` inside an invoke ships that tree with every invoke; a batch of
generations paid it once a prompt and a chunk. ``steps(n)`` is the same selection
(nnsight's `Iterations`, which ``tracer.iter`` returns) without the tracer.
"""

from __future__ import annotations

from nnsight.intervention.iterator import Iterations


def steps(count: int) -> Iterations:
    """The first ``count`` steps of the running generation (``tracer.iter[:count]``).

    Args:
        count: how many steps, from the first.

    Returns:
        What a ``for`` loop inside an invoke walks, step by step.
    """
    return Iterations()[:count]
