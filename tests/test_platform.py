"""What the engine sets up per platform, before any engine starts (no engine here)."""

from __future__ import annotations

import os
import threading

import pytest
import torch

from nnterp_widgets.engine import platform


@pytest.mark.parametrize(
    "dtype, expected",
    [
        ("float32", True),
        ("float", True),
        (torch.float32, True),
        ("auto", False),
        ("bfloat16", False),
        (torch.float16, False),
        (None, False),
    ],
)
def test_float32_is_recognised_in_every_spelling(dtype, expected):
    assert platform.is_float32(dtype) is expected


def test_cpu_host_keeps_float32_and_sets_only_its_cache(monkeypatch):
    if not platform.on_cpu():
        pytest.skip("a GPU host: see docs/gpu.md")
    assert platform.default_dtype() == "float32"
    assert platform.device_label() == "cpu"
    for name in ("VLLM_CPU_KVCACHE_SPACE", *platform.WORKER_START, *platform.EXACT_FLOAT32, *platform.CODE_TO_WORKERS):
        monkeypatch.delenv(name, raising=False)
    assert platform.prepare_environment("float32") == {
        "VLLM_CPU_KVCACHE_SPACE": platform.CPU_KV_CACHE_GIB,
        **platform.CODE_TO_WORKERS,
    }
    assert not set(platform.EXACT_FLOAT32) & set(os.environ)


def test_gpu_host_spawns_and_makes_float32_exact(monkeypatch):
    if platform.on_cpu():
        pytest.skip("a CPU host: vLLM's CPU platform")
    assert platform.default_dtype() == "auto"
    for name in (*platform.WORKER_START, *platform.EXACT_FLOAT32, *platform.CODE_TO_WORKERS):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TRITON_F32_DEFAULT", "tf32")  # the caller's own setting wins
    found = platform.prepare_environment("float32")
    assert found == {**platform.WORKER_START, **platform.CODE_TO_WORKERS, "VLLM_FLOAT32_MATMUL_PRECISION": "highest"}
    assert os.environ["TRITON_F32_DEFAULT"] == "tf32"


def test_one_tree_is_built_at_a_time_but_engine_starts_overlap():
    """`building` holds other threads' builds off until `built`, not until it ends: the
    second engine's tree is built while the first engine's processes start."""
    entered, second_in = threading.Event(), threading.Event()
    seen = {}

    def second():
        entered.wait(10)
        with platform.building():
            second_in.set()

    thread = threading.Thread(target=second)
    thread.start()
    with platform.building():
        entered.set()
        seen["while building"] = second_in.wait(0.5)
        platform.built()  # the tree is built; the (slow) start follows
        seen["while starting"] = second_in.wait(10)
    thread.join(10)
    assert seen == {"while building": False, "while starting": True}
    free = []  # nothing left held: another thread takes the lock at once

    def take():
        if platform.BUILD_LOCK.acquire(blocking=False):
            free.append(True)
            platform.BUILD_LOCK.release()

    taker = threading.Thread(target=take)
    taker.start()
    taker.join(10)
    assert free == [True]


def test_the_collector_pauses_while_any_start_runs_and_comes_back_after_the_last():
    import gc

    assert gc.isenabled()
    with platform.collector_paused():
        assert not gc.isenabled()
        with platform.collector_paused():  # a second start overlapping the first
            assert not gc.isenabled()
        assert not gc.isenabled()  # the first is still running
    assert gc.isenabled()
    gc.disable()  # a caller who turned it off keeps it off
    try:
        with platform.collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_failed_start_unfreezes_the_heap_it_froze():
    import gc

    before = gc.get_freeze_count()
    with pytest.raises(RuntimeError, match="start failed"):
        with platform.heap_frozen_from_now():
            assert gc.get_freeze_count() > before
            raise RuntimeError("start failed")
    assert gc.get_freeze_count() == 0
