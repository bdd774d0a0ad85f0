"""Large arrays from the engine's worker processes to the kernel's, through shared memory.

What a request saves travels from a worker to the kernel pickled, through vLLM's engine
core and its sockets, copied at every hop: on an H100 about 3 ms a megabyte (docs/gpu.md,
run 12: the prompt request's 9 MB pattern cost +32 ms at 512 tokens). An array of
`PARCEL_BYTES` or more made in a worker is wrapped as a `Parcel`: pickled, it writes
itself to a file in shared memory and the pickle carries the file's name; unpickled in
the kernel, the array is the file's pages mapped, and the file's name removed::

    out["pattern"] = parcel(pattern)     # in a worker: a Parcel; in the kernel: the array

Only where the kernel allowed it (`allow_parcels`, before an engine's processes start:
they inherit its process id) and only in another process than the kernel's (an
in-process engine's saves are never pickled). Where shared memory is missing or full,
a parcel pickles as the plain array. Files a lost request left behind are removed when
the kernel exits or, for a kernel that died, by the next kernel's `allow_parcels`.
"""

from __future__ import annotations

import atexit
import glob
import mmap
import os
import uuid

import numpy as np

#: Where parcels are written: a memory file system on Linux.
SHARED = "/dev/shm"
#: Arrays at least this large cross as parcels; a smaller one's file costs more than
#: its bytes do in the pickle.
PARCEL_BYTES = 1 << 20
#: The environment variable that names the kernel process parcels are for.
PARCELS_FOR = "NNTERP_PARCELS_FOR"
#: A parcel's file name: the prefix, its kernel's process id, a unique part.
PREFIX = "nnterp-parcel-"


class Parcel:
    """An array that pickles as a file in shared memory (see the module)."""

    __slots__ = ("array", "owner")

    def __init__(self, array: np.ndarray, owner: int):
        self.array = array
        self.owner = owner

    def __reduce__(self):
        array = np.ascontiguousarray(self.array)
        path = os.path.join(SHARED, f"{PREFIX}{self.owner}-{uuid.uuid4().hex}")
        try:
            with open(path, "wb") as file:
                file.write(array.data)
        except OSError:  # shared memory full or missing: the array's own bytes
            _remove(path)
            return array.__reduce__()
        return _unparcel, (path, array.dtype.str, array.shape)


def parcel(array: np.ndarray) -> np.ndarray | Parcel:
    """``array`` as a `Parcel` where it is made in a worker of a kernel that allows
    parcels and is large enough to gain; otherwise ``array`` itself."""
    owner = os.environ.get(PARCELS_FOR)
    if array.nbytes < PARCEL_BYTES or not owner or not owner.isdigit() or int(owner) == os.getpid():
        return array
    return Parcel(array, int(owner))


def allow_parcels() -> None:
    """Let the engine processes started from now on send parcels to this process (they
    inherit the environment), and remove parcels of kernels that are gone."""
    if not os.path.isdir(SHARED) or not os.access(SHARED, os.W_OK):
        return
    if os.environ.get(PARCELS_FOR) != str(os.getpid()):
        os.environ[PARCELS_FOR] = str(os.getpid())
        atexit.register(discard_parcels)
    for path in glob.glob(os.path.join(SHARED, PREFIX + "*")):
        owner = os.path.basename(path)[len(PREFIX) :].split("-")[0]
        if owner.isdigit() and not _alive(int(owner)):
            _remove(path)


def discard_parcels() -> None:
    """Remove this kernel's parcels that were never read (a request lost on its way):
    at exit, since another engine's may be on their way at any other time."""
    for path in glob.glob(os.path.join(SHARED, f"{PREFIX}{os.getpid()}-*")):
        _remove(path)


def _unparcel(path: str, dtype: str, shape: tuple) -> np.ndarray:
    # Mapped, not read: the array is the file's pages (copied only where written to), which
    # outlive the file's name; reading 9 MB costs milliseconds, mapping them 0.1 ms.
    try:
        with open(path, "rb") as file:
            pages = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_COPY)
        return np.frombuffer(pages, dtype=np.dtype(dtype)).reshape(shape)
    finally:
        _remove(path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
