"""The start-up heap frozen out of the cyclic garbage collector, once per process; and glibc's
malloc told to keep what is freed (``keep_freed_heap``).

Why: CPython's full (generation 2) collection walks every container object the process holds,
and a broker or an SDK client holds tens of thousands from its imports and start alone (about
47,000 in a broker, 36,000 in a client process) that live until it exits. On the machine our
figures come from each such walk took 20-28 ms of CPU on the event loop, a broker's and a
client's alike, and everything in flight waited for it: at 2,000 messages a second that is the
end-to-end p99.9. ``gc.freeze()`` moves what is alive now into the permanent generation, which
no collection scans again; a full collection then walks only what was created since (0.1-0.2 ms
in the same runs). Objects created later are collected as before, and reference counting frees
frozen objects as usual; only a cycle among them that becomes garbage later is kept (the
start-up heap is long-lived by nature). A collection first frees the garbage present now, so
none of it is kept.
"""

from __future__ import annotations

import ctypes
import gc
import os

_frozen = False


def freeze_startup_heap() -> bool:
    """Collect, then freeze what survives; once per process (later calls do nothing).
    True when this call froze."""
    global _frozen
    if _frozen:
        return False
    _frozen = True
    gc.collect()
    gc.freeze()
    return True


# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Free memory at the heap's top that free() leaves to the process rather than giving back.
HEAP_KEPT_FREE = 64 << 20
# Blocks under this size come from the heap, not from a mapping of their own: glibc's largest
# threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX), above the largest message (4 MiB) and pull.
HEAP_BLOCKS_UNDER = 32 << 20
# Environment variables through which a user sets glibc's malloc himself: then left alone.
_USER_MALLOC_SETTINGS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_", "GLIBC_TUNABLES")
_heap_kept: bool | None = None


def keep_freed_heap() -> bool:
    """glibc's malloc told to keep up to HEAP_KEPT_FREE of freed memory for the next
    allocations, and to serve blocks under HEAP_BLOCKS_UNDER from the heap; once per process.
    True when the settings are in force (set now or before).

    Why: by default glibc gives the top of its heap back to the kernel whenever more than twice
    the largest block it has freed lies free there (1 MiB after a pull's 512 KiB answer), and the
    next allocations fault every page in again, zero-filled (and, on a VM with free page
    reporting, backed afresh by the host). A broker answering pulls of 32 records of 16 KiB, 8
    in flight, did that for every answer: its event loop took one fault per 4 KiB pulled (877,000
    for 4.4 GB, about half its CPU), and the client reading the answers 340,000. Kept, the
    same drain took 0-4,000 (bench/scale.py's cold backlog drained from memory: the broker's CPU
    4.9-5.8 -> 1.7-2.0 s, the client's 2.7-3.0 -> 1.2-1.7 s). The memory kept is reused by the
    next allocations, not added to them.

    Nothing is changed where the C library is not glibc, or where the user has set glibc's
    malloc by its environment variables."""
    global _heap_kept
    if _heap_kept is not None:
        return _heap_kept
    _heap_kept = False
    if any(name in os.environ for name in _USER_MALLOC_SETTINGS) or not _glibc():
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # Either setting turns glibc's own adjustment of both off (its "dynamic threshold").
    _heap_kept = bool(mallopt(_M_MMAP_THRESHOLD, HEAP_BLOCKS_UNDER)) and bool(mallopt(_M_TRIM_THRESHOLD,
                                                                                   HEAP_KEPT_FREE))
    return _heap_kept


def _glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc")  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):  # no confstr (Windows), or not this name
        return False
