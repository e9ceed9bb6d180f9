"""Transaction headers: END_TRANSACTION (37) and CHECK_TRANSACTION_STATE (39), docs/protocol.md#transactions."""

from __future__ import annotations

from dataclasses import dataclass

from rocketmq_py.remoting.header import CommandHeader, Int32, Int64


@dataclass
class EndTransactionRequestHeader(CommandHeader):
    """Producer -> broker, oneway: the outcome of a local transaction for one half message.

    ``commitOrRollback`` uses the sysFlag transaction values: 8 commit, 12 rollback, 0 unknown.
    """

    producerGroup: str
    tranStateTableOffset: Int64
    commitLogOffset: Int64
    commitOrRollback: Int32
    msgId: str
    fromTransactionCheck: bool | None = None
    transactionId: str | None = None
    bname: str | None = None


@dataclass
class CheckTransactionStateRequestHeader(CommandHeader):
    """Broker -> one producer of the group, oneway; the body is the half message record."""

    tranStateTableOffset: Int64
    commitLogOffset: Int64
    msgId: str | None = None
    transactionId: str | None = None
    offsetMsgId: str | None = None
    bname: str | None = None
