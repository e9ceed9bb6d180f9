"""RebalanceService: a consumer's rebalance every ``rebalance_interval`` (20 s) and at once when
woken, which the client instance does on NOTIFY_CONSUMER_IDS_CHANGED."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from rocketmq_py.client.errors import MQClientError
from rocketmq_py.client.rebalance_impl import RebalanceImpl
from rocketmq_py.remoting.exceptions import RemotingError

log = logging.getLogger("rocketmq.client")

# How soon a rebalance looks again for a subscribed topic that had no route.
UNROUTED_REBALANCE_INTERVAL = 1.0


class RebalanceService:
    def __init__(self, rebalance: RebalanceImpl, interval: float) -> None:
        self.rebalance = rebalance
        self.interval = interval
        self.stopped = False
        self._wakeup = asyncio.Event()

    def wakeup(self) -> None:
        self._wakeup.set()

    def shutdown(self) -> None:
        self.stopped = True
        self._wakeup.set()

    async def run(self) -> None:
        # Ends on shutdown by itself: on Python 3.11 wait_for may swallow a cancellation that
        # arrives as the event is set, and a loop that relied on it would never end.
        while not self.stopped:
            # A subscribed topic with no route yet (a retry topic the first heartbeat just
            # created, a topic about to be made) is looked for again within a second, not 20.
            wait = min(self.interval, UNROUTED_REBALANCE_INTERVAL) if self.rebalance.unrouted else self.interval
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), wait)
            self._wakeup.clear()
            if self.stopped:
                return
            try:
                await self.rebalance.do_rebalance()
            except (MQClientError, RemotingError) as exc:
                log.warning("rebalance of %s failed: %s", self.rebalance.group, exc)
