"""HAService's bookkeeping for SYNC_MASTER sends (no sockets): group release, timeouts, isSlaveOK."""

from __future__ import annotations

import asyncio

from rocketmq_py.store.config import BrokerRole, MessageStoreConfig
from rocketmq_py.store.ha.ha_service import GroupTransferService
from rocketmq_py.store.message_store import DefaultMessageStore, PutMessageStatus


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
