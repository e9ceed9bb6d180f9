"""One trace record before encoding: Java's TraceContext with its TraceBeans.

A context is one event (a send, one consumption of a batch, an end of transaction); its beans
are the messages it concerns. The defaults are Java's, since a decoder reading our records
expects the same empty strings and zeros.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field

from rocketmq_py.client.message_id import create_uniq_id


class TraceType(enum.Enum):
    """The four record kinds, by Java's enum names (the first field of every record)."""

    Pub = "Pub"
    SubBefore = "SubBefore"
    SubAfter = "SubAfter"
    EndTransaction = "EndTransaction"


class MessageType(enum.IntEnum):
    """common.message.MessageType; records carry the ordinal."""

    Normal_Msg = 0
    Trans_Msg_Half = 1
    Trans_msg_Commit = 2
    Delay_Msg = 3


class ConsumeReturnType(enum.IntEnum):
    """How a listener call ended; SubAfter's contextCode is the ordinal."""

    SUCCESS = 0
    TIME_OUT = 1
    EXCEPTION = 2
    RETURNNULL = 3
    FAILED = 4


@dataclass
class TraceBean:
    """One message of a trace record."""

    topic: str = ""
    msg_id: str = ""
    offset_msg_id: str = ""
    # None where Java's bean holds null (a message without tags or keys): written as "null".
    tags: str | None = ""
    keys: str | None = ""
    store_host: str = ""
    client_host: str = ""
    store_time: int = 0
    retry_times: int = 0
    body_length: int = 0
    msg_type: MessageType = MessageType.Normal_Msg
    transaction_state: str = ""
    transaction_id: str = ""
    from_transaction_check: bool = False


@dataclass
class TraceContext:
    """One trace event; ``time_stamp`` is epoch millis, ``cost_time`` millis per message."""

    trace_type: TraceType
    trace_beans: list[TraceBean] = field(default_factory=list)
    time_stamp: int = field(default_factory=lambda: int(time.time() * 1000))
    region_id: str = ""
    group_name: str = ""
    cost_time: int = 0
    success: bool = True
    request_id: str = field(default_factory=create_uniq_id)
    context_code: int = 0
