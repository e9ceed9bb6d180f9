"""HAService's bookkeeping for SYNC_MASTER sends (no sockets): group release, timeouts, isSlaveOK."""

from __future__ import annotations

import asyncio
from typing import Any

from rocketmq_py.store.config import BrokerRole, MessageStoreConfig
from rocketmq_py.store.ha.flow_monitor import FlowMonitor
from rocketmq_py.store.ha.ha_service import GroupTransferService
from rocketmq_py.store.ha.housekeeping import Housekeeping
from rocketmq_py.store.message_store import DefaultMessageStore, PutMessageStatus
from tests.store_helpers import message
from tests.waiting import wait_until


async def test_one_acknowledgement_releases_every_waiter_it_covers() -> None:
    service = GroupTransferService(timeout=5.0)
    waiters = [service.put_request(offset) for offset in range(100, 10_100, 100)]
    service.notify_transfer_some(5_000)
    await asyncio.sleep(0)
    assert [w.done() for w in waiters] == [offset <= 5_000 for offset in range(100, 10_100, 100)]
    assert all(w.result() for w in waiters if w.done())
    service.notify_transfer_some(10_000)
    assert all(w.done() and w.result() for w in waiters)
    assert not service.waiters.entries


async def test_waiters_not_acknowledged_in_time_fail() -> None:
    service = GroupTransferService(timeout=0.05)
    late = service.put_request(1_000)
    assert await asyncio.wait_for(late, 2) is False
    service.shutdown()


class _SilentSlave:
    """A connected slave that never acknowledges anything."""

    woken = 0

    def wakeup(self) -> None:
        self.woken += 1


async def test_sync_master_without_slave_answers_slave_not_available(tmp_path: str) -> None:
    store = DefaultMessageStore(MessageStoreConfig(storePathRootDir=str(tmp_path), brokerRole=BrokerRole.SYNC_MASTER,
                                                   messageIndexInChildProcess=False, haSlaveFallbehindMax=1000,
                                                   slaveTimeout=50))
    await store.load()
    await store.start()
    try:
        assert await store.stored_to(10) is PutMessageStatus.SLAVE_NOT_AVAILABLE
        ha = store.ha_service
        ha.connections.add(_SilentSlave())  # type: ignore[arg-type]  # a slave is connected
        assert ha.is_slave_ok(999) and not ha.is_slave_ok(1000), "haSlaveFallbehindMax bounds the gap"
        # Connected and near enough, but it never acknowledges: FLUSH_SLAVE_TIMEOUT after slaveTimeout.
        assert await store.stored_to(10) is PutMessageStatus.FLUSH_SLAVE_TIMEOUT
        waiting = asyncio.ensure_future(store.stored_to(500))
        await asyncio.sleep(0)
        ha.notify_transfer_some(600)
        assert await waiting is PutMessageStatus.PUT_OK
        assert await store.stored_to(1_600) is PutMessageStatus.SLAVE_NOT_AVAILABLE  # 1,000 behind
        ha.connections.clear()
    finally:
        await store.shutdown()


def test_flow_monitor_reports_the_last_whole_second() -> None:
    flow = FlowMonitor()
    flow.add(100, now=10.2)
    flow.add(50, now=10.9)
    assert flow.transferred_byte_in_second(now=10.95) == 0, "the current second is not over"
    assert flow.transferred_byte_in_second(now=11.5) == 150
    flow.add(7, now=11.6)
    assert flow.transferred_byte_in_second(now=12.0) == 7
    assert flow.transferred_byte_in_second(now=14.0) == 0, "nothing moved in the second before"
    assert flow.total == 157


class _Slave:
    """A slave's connection as the master sees it, without a socket."""

    def __init__(self, addr: str, ack: int) -> None:
        self.client_addr = addr
        self.slave_ack_offset = ack
        self.next_transfer_from = max(ack, -1)
        self.flow = FlowMonitor()


async def test_master_runtime_info_has_each_slave_and_its_gap(tmp_path: str) -> None:
    store = DefaultMessageStore(MessageStoreConfig(storePathRootDir=str(tmp_path), messageIndexInChildProcess=False,
                                                   haSlaveFallbehindMax=1000))
    await store.load()
    await store.start()
    try:
        for _ in range(3):
            assert (await store.put_message(message("HaInfo", b"x" * 400))).ok
        end = store.get_max_phy_offset()
        ha = store.ha_service
        slaves: list[Any] = [_Slave("127.0.0.1:2", -1), _Slave("127.0.0.1:1", end), _Slave("127.0.0.1:3", end - 1000)]
        ha.connections.update(slaves)
        info = ha.runtime_info()
        assert info.master and info.masterCommitLogMaxOffset == end > 1000 and info.inSyncSlaveNums == 1
        first, second, third = info.haConnectionInfo
        assert (first.addr, first.slaveAckOffset, first.diff, first.inSync) == ("127.0.0.1:1", end, 0, True)
        # a slave that has not reported yet acknowledged nothing, and is not in sync
        assert (second.slaveAckOffset, second.diff, second.inSync) == (0, end, False)
        # 1,000 behind is haSlaveFallbehindMax: no longer in sync
        assert (third.slaveAckOffset, third.diff, third.inSync) == (end - 1000, 1000, False)
        assert b'"inSync":true' in info.encode()
        ha.connections.clear()
    finally:
        await store.shutdown()


async def test_housekeeping_expires_a_connection_only_after_a_whole_interval_without_a_read() -> None:
    """One timer per connection, re-armed from the last read: reads keep it alive however many
    intervals go by; then it expires once, an interval after the last read, not before."""
    loop = asyncio.get_running_loop()
    expired_at: list[float] = []
    keeper = Housekeeping(0.1, lambda: expired_at.append(loop.time()))
    started = loop.time()
    while loop.time() - started < 0.35:  # three and a half intervals of reads every 20 ms
        keeper.touch()
        await asyncio.sleep(0.02)
    assert not expired_at and not keeper.expired
    last_read = keeper.last
    assert await wait_until(lambda: bool(expired_at), 5.0)
    assert expired_at[0] - last_read >= 0.1 and keeper.expired
    keeper.touch()
    await asyncio.sleep(0.25)  # bounded: nothing may happen in it (the timer is not re-armed)
    assert len(expired_at) == 1
    keeper.cancel()
