"""Large arrays from the engine's processes through shared memory (`engine.parcels`).

The engine's own crossing (a real out-of-process engine) is in test_faults.py, whose
session runs in vLLM's processes; here the parcel's pickling on its own."""

from __future__ import annotations

import glob
import os
import pickle

import numpy as np
import pytest

from nnterp_widgets.engine import parcels
from nnterp_widgets.engine.parcels import PARCEL_BYTES, PARCELS_FOR, PREFIX, Parcel, parcel


def _mine() -> list[str]:
    return glob.glob(os.path.join(parcels.SHARED, f"{PREFIX}{os.getpid()}-*"))


def test_a_parcel_pickles_as_a_file_and_loads_as_the_array_once():
    array = np.random.default_rng(0).random((3, 256, 512)).astype(np.float32)
    payload = pickle.dumps(Parcel(array, os.getpid()))
    assert len(payload) < 1000  # the name, not the bytes
    (path,) = _mine()
    assert os.path.getsize(path) == array.nbytes
    back = pickle.loads(payload)
    assert isinstance(back, np.ndarray) and back.dtype == array.dtype
    np.testing.assert_array_equal(back, array)
    assert _mine() == []  # read once, then removed


def test_where_shared_memory_fails_a_parcel_pickles_as_the_array(monkeypatch, tmp_path):
    monkeypatch.setattr(parcels, "SHARED", str(tmp_path / "missing"))
    array = np.arange(PARCEL_BYTES, dtype=np.uint8).reshape(-1, 1024)
    payload = pickle.dumps(Parcel(array, os.getpid()))
    assert len(payload) > array.nbytes
    np.testing.assert_array_equal(pickle.loads(payload), array)


@pytest.mark.parametrize(
    "owner, size, crosses",
    [
        ("other", PARCEL_BYTES, True),  # a worker's large array
        ("other", PARCEL_BYTES - 1, False),  # too small to gain
        ("self", PARCEL_BYTES, False),  # made in the kernel's own process (in-process engine)
        (None, PARCEL_BYTES, False),  # a kernel that did not allow parcels
    ],
)
def test_only_a_workers_large_array_is_a_parcel(monkeypatch, owner, size, crosses):
    if owner is None:
        monkeypatch.delenv(PARCELS_FOR, raising=False)
    else:
        monkeypatch.setenv(PARCELS_FOR, str(os.getpid() + (owner == "other")))
    array = np.zeros(size, dtype=np.uint8)
    made = parcel(array)
    assert isinstance(made, Parcel) is crosses
    if not crosses:
        assert made is array


def test_parcels_of_a_dead_kernel_are_removed_when_another_allows_them(monkeypatch):
    monkeypatch.delenv(PARCELS_FOR, raising=False)
    gone = 2**22 + 12345  # above Linux's default pid_max: no such process
    stale = os.path.join(parcels.SHARED, f"{PREFIX}{gone}-left")
    open(stale, "wb").close()
    kept = pickle.dumps(Parcel(np.zeros(8, np.uint8), os.getpid()))  # this kernel's, unread
    parcels.allow_parcels()
    assert os.environ[PARCELS_FOR] == str(os.getpid())
    assert not os.path.exists(stale)
    assert len(_mine()) == 1
    pickle.loads(kept)
    assert _mine() == []


def test_an_unparceled_array_is_the_callers_own_to_write():
    array = np.arange(PARCEL_BYTES // 4, dtype=np.float32).reshape(256, -1)
    back = pickle.loads(pickle.dumps(Parcel(array, os.getpid())))
    back[0, 0] = -1.0  # written in place, as any returned array may be
    assert back[0, 0] == -1.0 and back[1, 0] == array[1, 0]
    again = pickle.loads(pickle.dumps(back))  # and it pickles as a plain array
    np.testing.assert_array_equal(again, back)
