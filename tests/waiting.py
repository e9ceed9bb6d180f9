"""The one way tests wait: poll a condition, bounded by a deadline (no sleeps as synchronization)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rocketmq_py.client.lite_pull_consumer import LitePullConsumer


async def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    """True as soon as ``predicate()`` holds; False if it still does not after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(interval)
    return True


async def wait_for_async(predicate: Callable[[], Awaitable[object]], timeout: float, interval: float = 0.1) -> bool:
    """``wait_until`` for a condition that needs a request to check (a broker's offsets, a query)."""
    deadline = time.monotonic() + timeout
    while not await predicate():
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(interval)
    return True


async def poll_count(consumer: LitePullConsumer, count: int, timeout: float) -> int:
    """How many messages ``consumer``'s polls returned, polling until ``count`` or ``timeout`` s."""
    got = 0
    deadline = time.monotonic() + timeout
    while got < count and time.monotonic() < deadline:
        got += len(await consumer.poll(0.5))
    return got
