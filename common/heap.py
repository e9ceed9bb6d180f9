"""The start-up heap frozen out of the cyclic garbage collector, once per process.

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

import gc

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
