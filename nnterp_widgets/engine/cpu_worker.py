"""The vLLM worker that lets nnsight trace on vLLM's CPU platform.

nnsight 0.8.1 names its GPU worker as vLLM's ``worker_cls``, and that worker refuses
any runner but the GPU one. On the CPU platform this worker is vLLM's own
`CPUWorker` with the runner swapped, once built, for a class that derives from both
nnsight's runner (the interleaving) and `CPUModelRunner` (the CPU device handling),
so neither is patched. The RPC entry points nnsight's engine calls come from
nnsight's worker.
"""

from __future__ import annotations

from nnsight.modeling.vllm.model_runners.GPUModelRunner import NNsightGPUModelRunner
from nnsight.modeling.vllm.workers.GPUWorker import NNsightGPUWorker
from vllm.v1.worker.cpu_model_runner import CPUModelRunner
from vllm.v1.worker.cpu_worker import CPUWorker


class NNsightCPUModelRunner(NNsightGPUModelRunner, CPUModelRunner):
    """nnsight's interleaving over vLLM's CPU runner (no constructor state of its own)."""


class NNsightCPUWorker(NNsightGPUWorker, CPUWorker):
    """vLLM's CPU worker, running nnsight's interleaving runner."""

    def init_device(self) -> None:
        # CPUWorker builds the runner; nnsight's own init_device would refuse it.
        CPUWorker.init_device(self)
        runner = self.model_runner
        if type(runner) is not CPUModelRunner:
            raise NotImplementedError(
                "nnterp_widgets traces vLLM's CPUModelRunner, but this worker built "
                f"{type(runner).__module__}.{type(runner).__name__}. Unset "
                "VLLM_USE_V2_MODEL_RUNNER to trace on the CPU."
            )
        runner.__class__ = NNsightCPUModelRunner


#: The dotted name vLLM imports in its worker process.
WORKER_CLS = f"{__name__}.NNsightCPUWorker"  # platform.CPU_WORKER_CLS names it without importing this
