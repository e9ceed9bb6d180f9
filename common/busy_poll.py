"""Busy-polling after traffic: a loop that keeps polling a little before it sleeps is awake when
the next request, or the answer it waits for, arrives.

Why: a process asleep in ``epoll_wait`` on an idle vCPU is woken by an inter-processor
interrupt, and on a VM that halts idle vCPUs at once (the guest's haltpoll governor with
``guest_halt_poll_ns`` 0, as on the machine our figures come from) each wake-up costs tens of
microseconds, on both ends of every exchange. With one call in flight that is most of a round
trip: broker_send's send_1 went from 6,300 to 15,300 sends/s with both ends polling for 300 µs
(9,000 with the broker alone). This is the kernel's guest halt-polling, done in user space by
the process that knows when traffic is likely.

The window adapts as haltpoll's does. After each read the loop polls for ``window``. When the
next read comes after the window closed but within ``max``, the window doubles (from
``START``), so the next such gap is caught; when it comes later than ``max``, the window
halves, down to 0 below ``START``. Sparse traffic therefore costs no CPU, and busy traffic at
most ``max`` of polling per read. While polling the loop yields its CPU to any other runnable
thread (``sched_yield``), so work sharing the core is not starved, and a process limited to one
CPU never polls: there, its peer could not run while it did.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
import weakref

# Microseconds, the default of ServerConfig, NettyServerConfig and the remoting layer's
# ClientConfig (a daemon's own outbound links); 0 is off. haltpoll's own default
# (guest_halt_poll_ns) is 200 µs too.
DEFAULT_BUSY_POLL_MAX_MICROS = 200
# The SDK's (client/instance.py's ClientConfig): long enough to span the gaps of a steady stream of
# up to one message every 2 ms, and of a timer-paced sender waking each millisecond, so a consumer
# is awake when its held pull is answered and a producer when its ack comes. A broker at 200 µs
# spends nothing on a sparse stream; an SDK client at 2,000 µs spends up to a core while messages
# come at least every 2 ms (the window fits the traffic: sparser streams and idle clients cost
# nothing), which is the end-to-end latency a user of a broker gets by default (docs/latency.md).
DEFAULT_CLIENT_BUSY_POLL_MAX_MICROS = 2000
START = 10e-6

_monotonic = time.monotonic
# os.sched_yield is POSIX-only; on Windows a zero sleep gives the rest of the time slice away too.
_yield = getattr(os, "sched_yield", None) or functools.partial(time.sleep, 0)


class BusyPoller:
    __slots__ = ("__weakref__", "_active", "_last_end", "_loop", "_until", "max", "window")

    def __init__(self, loop: asyncio.AbstractEventLoop, max_seconds: float) -> None:
        # Weak: ``_pollers`` is keyed weakly by the loop, and a value holding its key would keep
        # every loop that ever polled (one per test, say) alive.
        self._loop = weakref.ref(loop)
        self.max = max_seconds
        self.window = 0.0
        self._last_end = float("-inf")
        self._until = 0.0
        self._active = False

    @property
    def polling(self) -> bool:
        return self._active

    def begin(self) -> None:
        """A read arrived: fit the window to the idle gap that ended."""
        gap = _monotonic() - self._last_end
        window = self.window
        if gap > window:
            if gap <= self.max:
                self.window = min(self.max, max(window * 2, START))
            else:
                half = window / 2
                self.window = half if half >= START else 0.0

    def end(self) -> None:
        """The read was handled: poll for the window before the loop may sleep."""
        now = self._last_end = _monotonic()
        if self.window:
            self._until = now + self.window
            loop = self._loop()
            if not self._active and loop is not None:
                self._active = True
                loop.call_soon(self._poll)

    def _poll(self) -> None:
        # A ready callback makes the loop poll its sockets without blocking, then run this again.
        loop = self._loop()
        if _monotonic() < self._until and loop is not None:
            _yield()
            loop.call_soon(self._poll)
        else:
            self._active = False


def _usable_cpus() -> int:
    """The CPUs this process may run on: its affinity where the OS has one (Linux), else all."""
    affinity = getattr(os, "sched_getaffinity", None)  # not on macOS or Windows
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


_pollers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, BusyPoller] = weakref.WeakKeyDictionary()


def busy_poller(max_micros: int, loop: asyncio.AbstractEventLoop | None = None) -> BusyPoller | None:
    """The poller of ``loop`` (the running one by default), shared by every server and client on
    it: polling is a property of the loop, and any read on it is the traffic it waits for. None
    when ``max_micros`` is 0 or this process may use only one CPU. The first caller's maximum
    holds; a later, larger one raises it."""
    if max_micros <= 0 or _usable_cpus() < 2:
        return None
    loop = loop or asyncio.get_running_loop()
    poller = _pollers.get(loop)
    if poller is None:
        poller = _pollers[loop] = BusyPoller(loop, max_micros / 1e6)
    else:
        poller.max = max(poller.max, max_micros / 1e6)
    return poller
