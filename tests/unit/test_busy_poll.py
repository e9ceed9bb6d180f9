"""The busy-poll window: grown by gaps it would have caught, shrunk by sparse traffic, never left running."""

from __future__ import annotations

import asyncio
import os

import pytest

from rocketmq_py.common import busy_poll
from rocketmq_py.common.busy_poll import BusyPoller, busy_poller
from tests.waiting import wait_until


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class _Loop:
    def __init__(self) -> None:
        self.scheduled: list[object] = []

    def call_soon(self, callback: object) -> None:
        self.scheduled.append(callback)


def _read_after(poller: BusyPoller, clock: _Clock, gap: float) -> None:
    clock.now += gap
    poller.begin()
    poller.end()


def test_window_grows_to_catch_short_gaps_and_collapses_on_sparse_traffic(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(busy_poll, "_monotonic", clock)
    monkeypatch.setattr(busy_poll, "_yield", lambda: None)
    loop = _Loop()
    poller = BusyPoller(loop, 200e-6)  # type: ignore[arg-type]
    _read_after(poller, clock, 1.0)
    assert poller.window == 0 and loop.scheduled == [], "a first read after silence starts no polling"
    windows = []
    for _ in range(7):
        _read_after(poller, clock, 90e-6)
        windows.append(round(poller.window * 1e6))
    assert windows == [10, 20, 40, 80, 160, 160, 160], "doubles until the 90 µs gaps fall inside it"
    _read_after(poller, clock, 150e-6)  # inside the window: a hit, kept
    assert poller.window == pytest.approx(160e-6)
    _read_after(poller, clock, 190e-6)  # missed, but within max: grows, capped at max
    assert poller.window == pytest.approx(200e-6)
    shrinking = []
    for _ in range(6):
        _read_after(poller, clock, 5e-3)
        shrinking.append(round(poller.window * 1e6, 1))
    assert shrinking == [100, 50, 25, 12.5, 0, 0], "halves on gaps past max, then stops polling"


async def test_polling_stops_by_itself_on_a_real_loop() -> None:
    poller = BusyPoller(asyncio.get_running_loop(), 200e-6)
    poller.window = 200e-6
    poller.end()
    assert poller.polling
    assert await wait_until(lambda: not poller.polling, 2, 0.001), "the chain ends once its window has passed"
    poller.window = 0.0
    poller.end()
    assert not poller.polling, "a closed window schedules nothing"


async def test_one_poller_per_loop_and_none_when_off_or_on_one_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    first = busy_poller(100)
    assert first is not None and busy_poller(300) is first and first.max == pytest.approx(300e-6)
    assert busy_poller(0) is None
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert busy_poller(200) is None, "with one CPU the peer could not run while this process polled"


async def test_sdk_clients_poll_longer_than_daemons_by_default() -> None:
    """An SDK client spans a steady stream's gaps (docs/latency.md); a daemon's own links and
    servers keep the short default, so a broker's loop is not raised by its NameServer client."""
    from rocketmq_py.client.instance import ClientConfig, MQClientInstance
    from rocketmq_py.remoting.client import RemotingClient
    from rocketmq_py.remoting.server_config import NettyServerConfig

    instance = MQClientInstance(ClientConfig(namesrv_addr="127.0.0.1:9"), "c@1")
    assert instance.remoting.config.busy_poll_max_micros == busy_poll.DEFAULT_CLIENT_BUSY_POLL_MAX_MICROS
    assert busy_poll.DEFAULT_CLIENT_BUSY_POLL_MAX_MICROS >= 2 * 1000, "must span a 1 ms timer-paced sender's gaps"
    assert RemotingClient().config.busy_poll_max_micros == busy_poll.DEFAULT_BUSY_POLL_MAX_MICROS
    assert NettyServerConfig().serverBusyPollMaxMicros == busy_poll.DEFAULT_BUSY_POLL_MAX_MICROS
    off = MQClientInstance(ClientConfig(namesrv_addr="127.0.0.1:9", busy_poll_max_micros=0), "c@2")
    assert off.remoting.config.busy_poll_max_micros == 0
    await instance.remoting.close()
    await off.remoting.close()


def test_a_loop_that_polled_is_freed_with_its_poller() -> None:
    import gc
    import weakref

    loop = asyncio.new_event_loop()
    try:
        poller = busy_poller(200, loop)
        assert poller is not None
    finally:
        loop.close()
    gone = weakref.ref(loop)
    del loop, poller
    gc.collect()
    assert gone() is None, "the table of pollers must not keep a closed loop alive"
