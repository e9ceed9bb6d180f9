"""NameServer request/response headers (docs/protocol.md#nameserver-requests)."""

from __future__ import annotations

from dataclasses import dataclass

from rocketmq_py.remoting.header import CommandHeader, Int32, Int64


@dataclass
class RegisterBrokerRequestHeader(CommandHeader):
    brokerName: str
    brokerAddr: str
    clusterName: str
    haServerAddr: str
    brokerId: Int64
    compressed: bool | None = None
    bodyCrc32: Int32 | None = None


@dataclass
class RegisterBrokerResponseHeader(CommandHeader):
    haServerAddr: str | None = None
    masterAddr: str | None = None


@dataclass
class UnRegisterBrokerRequestHeader(CommandHeader):
    brokerName: str
    brokerAddr: str
    clusterName: str
    brokerId: Int64


@dataclass
class QueryDataVersionRequestHeader(CommandHeader):
    brokerName: str
    brokerAddr: str
    clusterName: str
    brokerId: Int64


@dataclass
class QueryDataVersionResponseHeader(CommandHeader):
    changed: bool


@dataclass
class GetRouteInfoRequestHeader(CommandHeader):
    topic: str
    acceptStandardJsonOnly: bool | None = None


@dataclass
class PutKVConfigRequestHeader(CommandHeader):
    namespace: str
    key: str
    value: str


@dataclass
class GetKVConfigRequestHeader(CommandHeader):
    namespace: str
    key: str


@dataclass
class GetKVConfigResponseHeader(CommandHeader):
    value: str | None = None


@dataclass
class DeleteKVConfigRequestHeader(CommandHeader):
    namespace: str
    key: str


@dataclass
class GetKVListByNamespaceRequestHeader(CommandHeader):
    namespace: str


@dataclass
class WipeWritePermOfBrokerRequestHeader(CommandHeader):
    brokerName: str


@dataclass
class WipeWritePermOfBrokerResponseHeader(CommandHeader):
    wipeTopicCount: Int32


@dataclass
class AddWritePermOfBrokerRequestHeader(CommandHeader):
    brokerName: str


@dataclass
class AddWritePermOfBrokerResponseHeader(CommandHeader):
    addTopicCount: Int32


@dataclass
class GetTopicsByClusterRequestHeader(CommandHeader):
    cluster: str


@dataclass
class DeleteTopicFromNamesrvRequestHeader(CommandHeader):
    topic: str
    clusterName: str | None = None
