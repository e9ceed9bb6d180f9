"""HAService: the HA port of a broker and what a SYNC_MASTER's sends wait for (docs/ha.md).

The master accepts slaves on haListenPort (AcceptSocketService) and serves each through an
HAConnection; the offset a slave acknowledges is push2SlaveMaxOffset, and the group transfer
releases every send waiting for an offset at or below it with one acknowledgement, as group
commit releases every put one fsync covered. A slave runs the HAClient instead.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import TYPE_CHECKING

from rocketmq_py.remoting.protocol.ha import HAConnectionRuntimeInfo, HARuntimeInfo
from rocketmq_py.store.config import BrokerRole
from rocketmq_py.store.ha.ha_client import HAClient
from rocketmq_py.store.ha.ha_connection import HAConnection
from rocketmq_py.store.offset_waiters import OffsetWaiters

if TYPE_CHECKING:
    from rocketmq_py.store.message_store import DefaultMessageStore

log = logging.getLogger("rocketmq.store")


class GroupTransferService:
    """SYNC_MASTER sends waiting for the slave, released as group commit releases puts
    (OffsetWaiters), each failing after slaveTimeout."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.waiters = OffsetWaiters()

    def put_request(self, offset: int) -> asyncio.Future[bool]:
        return self.waiters.add(offset, self.timeout)

    def notify_transfer_some(self, acked: int) -> None:
        """Every waiter ``acked`` covers released at once."""
        self.waiters.release_upto(acked)

    def shutdown(self) -> None:
        self.waiters.release_all(False)


class HAService:
    def __init__(self, store: DefaultMessageStore) -> None:
        self.store = store
        self.connections: set[HAConnection] = set()
        self.push2slave_max_offset = 0
        self.group_transfer = GroupTransferService(store.config.slaveTimeout / 1000)
        self.ha_client = HAClient(store)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0
        # TLS on the HA port (rocketmq-py's addition: 4.9's HA is plain TCP), set by a broker
        # whose tls.server.mode is enforcing (docs/tls.md)
        self.server_ssl: ssl.SSLContext | None = None

    # -- master -----------------------------------------------------------------------------

    async def start(self, host: str) -> None:
        """Listen on haListenPort (0: any free port), as every role of Java's broker does."""
        self._server = await asyncio.start_server(self._accept, host, self.store.config.haListenPort,
                                                  reuse_address=True, ssl=self.server_ssl)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("HAService listening on %s:%d%s", host, self.port, " (TLS)" if self.server_ssl else "")

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = HAConnection(self, reader, writer)
        log.info("HAService receive new connection, %s", conn.client_addr)
        self.connections.add(conn)
        try:
            await conn.run()
        finally:
            self.connections.discard(conn)

    @property
    def connection_count(self) -> int:
        return len(self.connections)

    def is_slave_ok(self, master_put_where: int) -> bool:
        """A slave is connected and less than haSlaveFallbehindMax behind ``master_put_where``."""
        return bool(self.connections) and (
            master_put_where - self.push2slave_max_offset < self.store.config.haSlaveFallbehindMax)

    def slave_fall_behind_much(self) -> int:
        """The master's bytes no slave has acknowledged (Java's slaveFallBehindMuch)."""
        return self.store.get_max_phy_offset() - self.push2slave_max_offset

    def runtime_info(self) -> HARuntimeInfo:
        """This broker's replication state in RocketMQ 5.x's HARuntimeInfo shape (its
        DefaultHAService.getRuntimeInfo): a slave's client, or a master's connected slaves."""
        store = self.store
        put_where = store.get_max_phy_offset()
        info = HARuntimeInfo(master=store.config.brokerRole != BrokerRole.SLAVE, masterCommitLogMaxOffset=put_where)
        if not info.master:
            info.masterCommitLogMaxOffset = 0
            info.haClientRuntimeInfo = self.ha_client.runtime_info()
            return info
        fall_behind_max = store.config.haSlaveFallbehindMax
        for conn in sorted(self.connections, key=lambda c: c.client_addr):
            # -1 until the slave's first report, counted as nothing acknowledged
            ack = max(conn.slave_ack_offset, 0)
            in_sync = conn.slave_ack_offset >= 0 and put_where - ack < fall_behind_max
            info.haConnectionInfo.append(HAConnectionRuntimeInfo(
                addr=conn.client_addr, slaveAckOffset=ack, diff=put_where - ack, inSync=in_sync,
                transferredByteInSecond=conn.flow.transferred_byte_in_second(),
                transferFromWhere=max(conn.next_transfer_from, 0)))
            info.inSyncSlaveNums += in_sync
        return info

    def notify_transfer_some(self, offset: int) -> None:
        if offset > self.push2slave_max_offset:
            self.push2slave_max_offset = offset
            self.group_transfer.notify_transfer_some(offset)

    def wait_transfer(self, offset: int) -> asyncio.Future[bool]:
        """True once a slave acknowledged ``offset``; False after slaveTimeout."""
        if offset <= self.push2slave_max_offset:
            fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            fut.set_result(True)
            return fut
        fut = self.group_transfer.put_request(offset)
        for conn in self.connections:
            conn.wakeup()
        return fut

    # -- slave ------------------------------------------------------------------------------

    def update_master_address(self, addr: str) -> None:
        self.ha_client.update_master_address(addr)

    async def shutdown(self) -> None:
        await self.ha_client.shutdown()
        if self._server is not None:
            self._server.close()
            self._server = None
        for conn in list(self.connections):
            conn.writer.close()
        self.group_transfer.shutdown()
