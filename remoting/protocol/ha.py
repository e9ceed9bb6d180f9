"""HARuntimeInfo: a broker's replication state, as RocketMQ 5.x's GET_BROKER_HA_STATUS (907) body.

RocketMQ 4.9.7 has no such body and no HA key in GET_BROKER_RUNTIME_INFO; 5.x added this one
(``remoting/protocol/body/HARuntimeInfo.java``), and its field names are the ones ours uses, in
this body and flattened into the runtime info (docs/ha.md, operators). Fields alphabetical, as
fastjson writes them; a boolean ``isX`` getter is the property ``x``.
"""

from __future__ import annotations

from pydantic import Field

from rocketmq_py.remoting.protocol.json_body import JsonBody


class HAClientRuntimeInfo(JsonBody):
    """A slave's side: the master it copies from and how far its own log reaches."""

    activated: bool = False
    lastReadTimestamp: int = 0
    lastWriteTimestamp: int = 0
    masterAddr: str | None = None
    masterFlushOffset: int = 0
    maxOffset: int = 0
    transferredByteInSecond: int = 0


class HAConnectionRuntimeInfo(JsonBody):
    """One slave as its master sees it: ``diff`` is the master's max offset minus the slave's
    acknowledged offset; ``inSync`` is that gap under haSlaveFallbehindMax."""

    addr: str = ""
    diff: int = 0
    inSync: bool = False
    slaveAckOffset: int = 0
    transferFromWhere: int = 0
    transferredByteInSecond: int = 0


class HARuntimeInfo(JsonBody):
    haClientRuntimeInfo: HAClientRuntimeInfo = Field(default_factory=HAClientRuntimeInfo)
    haConnectionInfo: list[HAConnectionRuntimeInfo] = Field(default_factory=list)
    inSyncSlaveNums: int = 0
    master: bool = True
    masterCommitLogMaxOffset: int = 0
