"""Route bodies: TopicRouteData, ClusterInfo, RegisterBrokerBody, KVTable, TopicList.

Their fields in docs/protocol.md#nameserver-requests.

Broker ids key the ``brokerAddrs`` maps. Java writes them unquoted by default (fastjson) and
quoted for clients of version >= 4.9.4 or ones that ask for standard JSON; the Go client reads
only the unquoted form. ``encode(standard=...)`` produces either, and ``decode`` reads both.
"""

from __future__ import annotations

import json
import struct
import zlib

from pydantic import AliasChoices, Field

from rocketmq_py.remoting.protocol.json_body import JsonBody, unquote_int_keys
from rocketmq_py.remoting.protocol.topic import DataVersion, TopicConfig, TopicConfigSerializeWrapper, TopicFilterType

MASTER_ID = 0


class QueueData(JsonBody):
    brokerName: str
    perm: int
    readQueueNums: int
    # NameServers up to 4.8.0 wrote this as ``topicSynFlag``; our SDK reads routes from those too.
    topicSysFlag: int = Field(default=0, validation_alias=AliasChoices("topicSysFlag", "topicSynFlag"))
    writeQueueNums: int


class BrokerData(JsonBody):
    brokerAddrs: dict[int, str] = Field(default_factory=dict)
    brokerName: str
    cluster: str

    def select_broker_addr(self) -> str | None:
        """The master's address, else any slave's (Java's BrokerData.selectBrokerAddr)."""
        return self.brokerAddrs.get(MASTER_ID) or next(iter(self.brokerAddrs.values()), None)




class TopicRouteData(JsonBody):
    brokerDatas: list[BrokerData] = Field(default_factory=list)
    filterServerTable: dict[str, list[str]] = Field(default_factory=dict)
    orderTopicConf: str | None = None
    queueDatas: list[QueueData] = Field(default_factory=list)

    def encode_for(self, standard: bool) -> bytes:
        """Standard JSON for clients >= 4.9.4 (map keys quoted), fastjson's default otherwise."""
        text = self.model_dump_json(exclude_none=True)
        return (text if standard else unquote_int_keys(text, "brokerAddrs")).encode()


class ClusterInfo(JsonBody):
    """GET_BROKER_CLUSTER_INFO's body; Java always writes broker ids unquoted here."""

    brokerAddrTable: dict[str, BrokerData] = Field(default_factory=dict)
    clusterAddrTable: dict[str, list[str]] = Field(default_factory=dict)

    def encode(self) -> bytes:
        return unquote_int_keys(self.model_dump_json(exclude_none=True), "brokerAddrs").encode()


class KVTable(JsonBody):
    table: dict[str, str] = Field(default_factory=dict)


class TopicList(JsonBody):
    brokerAddr: str | None = None
    topicList: list[str] = Field(default_factory=list)


class RegisterBrokerBody(JsonBody):
    filterServerList: list[str] = Field(default_factory=list)
    topicConfigSerializeWrapper: TopicConfigSerializeWrapper = Field(default_factory=TopicConfigSerializeWrapper)

    def encode_compressed(self) -> bytes:
        """The ``compressed=true`` form (broker ``compressedRegister``): zlib over length-prefixed parts."""
        parts = [_lp(self.topicConfigSerializeWrapper.dataVersion.model_dump_json().encode())]
        table = self.topicConfigSerializeWrapper.topicConfigTable
        parts.append(struct.pack(">i", len(table)))
        parts.extend(_lp(f"{c.topicName} {c.readQueueNums} {c.writeQueueNums} {c.perm} {c.topicFilterType}".encode())
                     for c in table.values())
        parts.append(_lp(json.dumps(self.filterServerList).encode()))
        return zlib.compress(b"".join(parts), 9)

    @classmethod
    def decode_compressed(cls, data: bytes) -> RegisterBrokerBody:
        """Read the ``compressed=true`` form; anything malformed raises ValueError (or zlib.error)."""
        try:
            return cls._decode_compressed(zlib.decompress(data))
        except struct.error as exc:
            raise ValueError(f"compressed register body truncated: {exc}") from None

    @classmethod
    def _decode_compressed(cls, raw: bytes) -> RegisterBrokerBody:
        pos = 0

        def take() -> bytes:
            nonlocal pos
            (n,) = struct.unpack_from(">i", raw, pos)
            if n < 0 or pos + 4 + n > len(raw):
                raise ValueError("compressed register body truncated")
            pos += 4 + n
            return raw[pos - n:pos]

        version = DataVersion.decode(take())
        (count,) = struct.unpack_from(">i", raw, pos)
        pos += 4
        table: dict[str, TopicConfig] = {}
        for _ in range(count):
            name, read, write, perm, ftype = take().decode().split(" ")
            table[name] = TopicConfig(topicName=name, readQueueNums=int(read), writeQueueNums=int(write),
                                      perm=int(perm), topicFilterType=TopicFilterType(ftype))
        filters = json.loads(take())
        return cls(filterServerList=filters,
                   topicConfigSerializeWrapper=TopicConfigSerializeWrapper(dataVersion=version,
                                                                           topicConfigTable=table))


def _lp(b: bytes) -> bytes:
    return struct.pack(">i", len(b)) + b
