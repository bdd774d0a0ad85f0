"""Which device the engine tests run on: the CPU (the default, CI) or CUDA (the GPU run).

`conftest` selects it from ``pytest --device=...`` (or ``NNTERP_TEST_DEVICE``); the
transformers reference runs on the same device, so a test compares two values that
live on one device. Tensors a test builds to compare or edit with go there too
(`tensor` helpers below); what a test writes *into* the engine may stay on the CPU,
as a user's would (the engine moves it).
"""

from __future__ import annotations

import os

import torch

DEVICES = ("cpu", "cuda")
ENV = "NNTERP_TEST_DEVICE"
#: Why the GPU run skips everything on a machine without one.
NO_CUDA = "--device=cuda asks for the GPU run, and torch sees no CUDA device here"

DEVICE = os.environ.get(ENV, "cpu")


def select(device: str) -> None:
    """Run the tests on ``device``; on CUDA, float32 references are exact float32."""
    global DEVICE
    DEVICE = device
    os.environ[ENV] = device  # for the engine's spawned processes and later imports
    if device == "cuda":
        # transformers' float32 reference must not round through TF32 on the GPU
        # (torch's defaults already say so for matmuls; cuDNN's default is TF32).
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False


def missing() -> str | None:
    """Why the selected device cannot run here, or ``None``."""
    if DEVICE == "cuda" and not torch.cuda.is_available():
        return NO_CUDA
    return None


def on_device(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.to(DEVICE)


#: How far two engine runs of the same request may differ on this device. On the CPU the
#: kernels are deterministic: 0. On CUDA, a kernel's reduction order depends on how the
#: step's tokens are batched (a patching request batches 64 invokes, a direct one other
#: counts), so float32 sums round differently: the GPU run measured up to 6e-6 on
#: logit differences of about 1 (issue 26); 1e-5 leaves room above that and far below
#: any effect a test reads (0.1 and up).
RUN_TO_RUN = {"cpu": dict(rtol=0.0, atol=0.0), "cuda": dict(rtol=1e-5, atol=1e-5)}


def assert_same_run(got, expected) -> None:
    """Two engine runs' arrays equal: exactly on the CPU, to `RUN_TO_RUN` on CUDA."""
    import numpy as np

    np.testing.assert_allclose(got, expected, **RUN_TO_RUN[DEVICE])
