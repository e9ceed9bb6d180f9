"""What users send and get back: Message, SendResult, SendStatus."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

from rocketmq_py.client.allocate import MessageQueue
from rocketmq_py.remoting.protocol.message import MessageConst, MessageExt

__all__ = ["Message", "MessageExt", "MessageQueue", "SendResult", "SendStatus"]


@dataclass
class Message:
    topic: str
    body: bytes
    tags: str | None = None
    keys: str | Sequence[str] | None = None
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    delay_time_level: int = 0
    wait_store_msg_ok: bool = True

    def to_properties(self) -> dict[str, str]:
        """User properties plus the ones RocketMQ keeps for TAGS, KEYS, DELAY and WAIT."""
        props = dict(self.properties)
        if self.tags:
            props[MessageConst.TAGS] = self.tags
        if self.keys:
            props[MessageConst.KEYS] = self.keys if isinstance(self.keys, str) else MessageConst.KEY_SEPARATOR.join(
                self.keys)
        if self.delay_time_level > 0:
            props[MessageConst.DELAY_TIME_LEVEL] = str(self.delay_time_level)
        props[MessageConst.WAIT_STORE_MSG_OK] = "true" if self.wait_store_msg_ok else "false"
        return props


class SendStatus(Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass
class SendResult:
    send_status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    region_id: str = "DefaultRegion"
    trace_on: bool = True
