"""HAClient: a slave's connection to its master's HA port (docs/ha.md).

Reports the slave's CommitLog max offset at once on connecting, whenever it advances and at
least every haSendHeartbeatInterval; appends each frame at exactly the offset it names (the
store refuses any other and the connection is dropped and made again), and the store builds its
ConsumeQueues and index from those bytes as a master's puts do. A master silent for
haHousekeepingInterval is dropped. A slave whose log turns out to differ from the master's
stops replicating and says so: it never merges two logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from typing import TYPE_CHECKING

from rocketmq_py.remoting.protocol.ha import HAClientRuntimeInfo
from rocketmq_py.store.ha.flow_monitor import FlowMonitor
from rocketmq_py.store.ha.housekeeping import Housekeeping
from rocketmq_py.store.ha.transfer import FrameReader, TransferProtocolError, encode_report

if TYPE_CHECKING:
    from rocketmq_py.store.message_store import DefaultMessageStore

log = logging.getLogger("rocketmq.store")

# After a connection that broke, before dialling again (Java dials again at once, and waits 5 s
# only when the dial fails; a pause keeps a master that keeps refusing from being hammered).
RECONNECT_PAUSE = 1.0
CONNECT_TIMEOUT = 3.0
# A master that closes the connection this many times in a row right after the slave's report,
# before a single frame, refuses it: its log ends before the slave's (ours says so in its log).
REFUSALS_TO_STOP = 3


class SlaveDivergedError(RuntimeError):
    """The master's bytes do not continue this slave's log: another history at the same offset."""


class HAClient:
    def __init__(self, store: DefaultMessageStore) -> None:
        self.store = store
        self.master_address: str | None = None
        self.current_reported_offset = 0
        # wall-clock ms of the last frame bytes read and the last report written (0: never),
        # for the runtime info
        self.last_read_timestamp = 0
        self.last_write_timestamp = 0
        self.flow = FlowMonitor()
        self.connected = False
        # Set when replication stopped for good (a diverged log): an operator has to look.
        self.stopped_reason: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._refusals = 0
        # TLS to the master's HA port, set by a broker with tls.enable=true (docs/tls.md)
        self.client_ssl: ssl.SSLContext | None = None

    def update_master_address(self, addr: str) -> None:
        if addr == self.master_address:
            return
        log.info("update master address, OLD: %s NEW: %s", self.master_address, addr)
        self.master_address = addr
        if self._writer is not None:
            self._writer.close()  # reconnects to the new address
        if self._task is None and self.stopped_reason is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def runtime_info(self) -> HAClientRuntimeInfo:
        """RocketMQ 5.x's HAClientRuntimeInfo: ``activated`` while connected to the master.
        ``masterFlushOffset`` is 5.x's controller-mode figure, which 4.9's protocol never
        carries: always 0."""
        return HAClientRuntimeInfo(masterAddr=self.master_address, maxOffset=self.store.get_max_phy_offset(),
                                   lastReadTimestamp=self.last_read_timestamp,
                                   lastWriteTimestamp=self.last_write_timestamp,
                                   transferredByteInSecond=self.flow.transferred_byte_in_second(),
                                   activated=self.connected)

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        cfg = self.store.config
        while True:
            addr = self.master_address
            assert addr is not None
            host, _, port = addr.rpartition(":")
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(host, int(port), ssl=self.client_ssl,
                                            server_hostname="" if self.client_ssl is not None else None),
                    CONNECT_TIMEOUT)
            except (OSError, TimeoutError, ValueError) as exc:
                log.warning("HAClient: connect to master %s failed: %s", addr, exc)
                await asyncio.sleep(cfg.haSendHeartbeatInterval / 1000)
                continue
            self._writer = writer
            self.connected = True
            try:
                await self._serve(reader, writer)
            except SlaveDivergedError as exc:
                self.stopped_reason = str(exc)
                log.error("HAClient: replication stopped: %s", exc)
                return
            except (OSError, TransferProtocolError, TimeoutError) as exc:
                log.warning("HAClient: connection to master %s ends: %s", addr, exc)
            finally:
                self.connected = False
                self._writer = None
                writer.close()
                with contextlib.suppress(OSError, ConnectionError):
                    await writer.wait_closed()
            await asyncio.sleep(RECONNECT_PAUSE)

    async def _report(self, writer: asyncio.StreamWriter, offset: int) -> None:
        self.current_reported_offset = offset
        writer.write(encode_report(offset))
        self.last_write_timestamp = int(time.time() * 1000)
        await writer.drain()

    async def _heartbeat(self, writer: asyncio.StreamWriter) -> None:
        interval = self.store.config.haSendHeartbeatInterval / 1000
        while True:
            await asyncio.sleep(interval)
            await self._report(writer, self.store.get_max_phy_offset())

    def _expire(self, writer: asyncio.StreamWriter) -> None:
        log.warning("HAClient, housekeeping, found this connection[%s] expired, master not response some time, so "
                    "close connection", self.master_address)
        writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        store = self.store
        frames = FrameReader()
        await self._report(writer, store.get_max_phy_offset())
        heartbeat = asyncio.create_task(self._heartbeat(writer))
        housekeeping = Housekeeping(store.config.haHousekeepingInterval / 1000, lambda: self._expire(writer))
        received = False
        try:
            while True:
                if heartbeat.done():
                    heartbeat.result()  # a failed report ends the connection
                data = await reader.read(1 << 20)
                if not data:
                    if not received and not housekeeping.expired:
                        self._refusals += 1
                        log.error("HAClient: master %s closed the connection before sending anything, after our "
                                  "offset %d: a master refuses a slave whose log is ahead of its own",
                                  self.master_address, self.current_reported_offset)
                        if self._refusals >= REFUSALS_TO_STOP:
                            raise SlaveDivergedError(
                                f"master {self.master_address} refused our offset {self.current_reported_offset} "
                                f"{self._refusals} times: this slave's log is ahead of the master's; it will not "
                                "be merged (an operator must move one of the stores aside)")
                    return
                housekeeping.touch()
                self.last_read_timestamp = int(time.time() * 1000)
                self.flow.add(len(data))
                for offset, body in frames.feed(data):
                    received = True
                    self._refusals = 0
                    slave_offset = store.get_max_phy_offset()
                    if slave_offset != 0 and slave_offset != offset:
                        log.error("master pushed offset not equal the max phy offset in slave, SLAVE: %d MASTER: %d",
                                  slave_offset, offset)
                        return
                    if body and not store.append_to_commit_log(offset, body, dispatch=False):
                        log.error("appendToPhyQueue failed %d %d", offset, len(body))
                        return
                # Acknowledged once in the mapped file, as Java's slave does (its reput thread
                # dispatches afterwards): a SYNC_MASTER's sends wait for the copy, not the queues.
                now_at = store.get_max_phy_offset()
                if now_at > self.current_reported_offset:
                    self.current_reported_offset = now_at
                    writer.write(encode_report(now_at))
                    self.last_write_timestamp = int(time.time() * 1000)
                store.dispatch_replicated()
                await writer.drain()
        finally:
            housekeeping.cancel()
            heartbeat.cancel()
            # asyncio.wait: this task's own cancellation (shutdown) still propagates.
            await asyncio.wait([heartbeat])
            if not heartbeat.cancelled():
                heartbeat.exception()  # retrieved: a failed report already ended the connection
