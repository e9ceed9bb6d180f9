"""The HA keys of GET_BROKER_RUNTIME_INFO: who replicates from whom and how far behind (docs/ha.md).

RocketMQ 4.9.7's runtime info has no HA key (its master only logs ``Slave fall behind master``
every minute); 5.x serves the same facts as a separate body, HARuntimeInfo (GET_BROKER_HA_STATUS,
907). Ours flattens that body into the table under 5.x's field names with an ``ha`` prefix, plus
4.9.7's own two figures, ``haPush2SlaveMaxOffset`` (HAService.push2SlaveMaxOffset) and
``slaveFallBehindMuch`` (DefaultMessageStore.slaveFallBehindMuch), so ``mqadmin brokerStatus``
and ``clusterList`` show them and a Java tool reading the table finds them too.

A slave knows how much it holds but not how much its master holds: the HA stream carries no
master offset. So a slave asks its master's runtime info for ``commitLogMaxOffset`` while it
answers (MASTER_TIMEOUT, -1 when the master does not answer), the figure its lag is taken from.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING

from rocketmq_py.remoting.codes import RequestCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.exceptions import RemotingError
from rocketmq_py.remoting.protocol.route import KVTable

if TYPE_CHECKING:
    from rocketmq_py.broker.controller import BrokerController

log = logging.getLogger("rocketmq.broker")

MASTER_TIMEOUT = 1.0


async def master_max_offset(broker: BrokerController) -> int:
    """The CommitLog max offset the master reports now, -1 when it is unknown or silent."""
    addr = broker.slave_synchronize.master_addr
    if addr is None or addr == broker.broker_addr:
        return -1
    try:
        # wait_for: the call runs in a task of its own, since a handler's first step may run
        # outside any (remoting.processor) and the client's connect uses asyncio.timeout.
        response = await asyncio.wait_for(broker.outer_api.client.invoke(
            addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), MASTER_TIMEOUT), MASTER_TIMEOUT)
        if response.code != ResponseCode.SUCCESS:
            return -1
        return int(KVTable.decode(response.body or b"{}").table.get("commitLogMaxOffset", "-1"))
    except (RemotingError, ValueError, OSError, TimeoutError) as exc:
        log.debug("runtime info: master %s max offset unknown: %s", addr, exc)
        return -1


async def ha_runtime_info(broker: BrokerController) -> dict[str, str]:
    """The HA keys of this broker's role (docs/ha.md lists them)."""
    service = broker.message_store.ha_service
    info = service.runtime_info()
    if not info.master:
        client = info.haClientRuntimeInfo
        master_max = await master_max_offset(broker)
        return {
            "haMaster": "false",
            "haMasterAddr": client.masterAddr or "",
            "haClientActivated": str(client.activated).lower(),
            "haClientMaxOffset": str(client.maxOffset),
            "haLastReadTimestamp": str(client.lastReadTimestamp),
            "haLastWriteTimestamp": str(client.lastWriteTimestamp),
            "haTransferredByteInSecond": str(client.transferredByteInSecond),
            "haMasterCommitLogMaxOffset": str(master_max),
            "slaveFallBehindMuch": str(max(master_max - client.maxOffset, 0) if master_max >= 0 else -1),
        }
    return {
        "haMaster": "true",
        "haMasterCommitLogMaxOffset": str(info.masterCommitLogMaxOffset),
        "haSlaveNum": str(len(info.haConnectionInfo)),
        "haInSyncSlaveNums": str(info.inSyncSlaveNums),
        "haPush2SlaveMaxOffset": str(service.push2slave_max_offset),
        "slaveFallBehindMuch": str(service.slave_fall_behind_much()),
        "haConnectionInfo": json.dumps([c.model_dump() for c in info.haConnectionInfo], separators=(",", ":")),
    }
