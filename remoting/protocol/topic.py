"""Topic metadata shared by broker, NameServer and clients: TopicConfig, DataVersion, PermName.

These travel in REGISTER_BROKER bodies, topics.json and admin answers (docs/protocol.md#nameserver-requests,
docs/store-formats.md#config-files), always with Java's field names in alphabetical order.
"""

from __future__ import annotations

import sys
import time
from enum import StrEnum

from pydantic import Field, field_validator

from rocketmq_py.remoting.protocol.json_body import JsonBody

# MixAll's group topics: failed messages of a consumer group come back through its retry topic
# and end in its dead-letter topic.
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


class PermName:
    """Permission bits of a topic or broker (docs/behaviours.md#topics)."""

    PERM_PRIORITY = 8
    PERM_READ = 4
    PERM_WRITE = 2
    PERM_INHERIT = 1

    @staticmethod
    def is_readable(perm: int) -> bool:
        return bool(perm & PermName.PERM_READ)

    @staticmethod
    def is_writeable(perm: int) -> bool:
        return bool(perm & PermName.PERM_WRITE)

    @staticmethod
    def is_inherited(perm: int) -> bool:
        return bool(perm & PermName.PERM_INHERIT)

    @staticmethod
    def to_string(perm: int) -> str:
        return ("R" if perm & 4 else "-") + ("W" if perm & 2 else "-") + ("X" if perm & 1 else "-")


class TopicFilterType(StrEnum):
    SINGLE_TAG = "SINGLE_TAG"
    MULTI_TAG = "MULTI_TAG"


# TopicConfig defaults of Java's class (docs/behaviours.md#topics).
DEFAULT_READ_QUEUE_NUMS = 16
DEFAULT_WRITE_QUEUE_NUMS = 16

# The most read or write queues a topic may have on one broker. Java sets no bound beyond int32,
# and every client expands a route into one MessageQueue per queue on each refresh and rebalance:
# a topic created with 2,147,483,647 queues hangs every producer and consumer that looks it up.
# Deployments use tens to hundreds per broker, and 5.x's own largest topic (its benchmark topic)
# has 1,024; 65,536 leaves sixty-four times that, while a route of that size still costs a client
# milliseconds (docs/request-fields.md).
MAX_QUEUE_NUMS = 65536


def queue_nums_problem(read_queue_nums: int, write_queue_nums: int, least: int = 1) -> str | None:
    """None when a topic's queue counts are within ``least``..MAX_QUEUE_NUMS, else the reason,
    naming the field (answered as a remark)."""
    for name, value in (("readQueueNums", read_queue_nums), ("writeQueueNums", write_queue_nums)):
        if not least <= value <= MAX_QUEUE_NUMS:
            return f"{name} {value} is out of range: a topic has {least} to {MAX_QUEUE_NUMS} queues on a broker"
    return None


class TopicConfig(JsonBody):
    order: bool = False
    perm: int = PermName.PERM_READ | PermName.PERM_WRITE
    readQueueNums: int = DEFAULT_READ_QUEUE_NUMS
    topicFilterType: TopicFilterType = TopicFilterType.SINGLE_TAG
    topicName: str
    topicSysFlag: int = 0
    writeQueueNums: int = DEFAULT_WRITE_QUEUE_NUMS

    @field_validator("topicName")
    @classmethod
    def _interned(cls, name: str) -> str:
        """One string object per topic name, shared by the broker's and the store's tables
        (the plain sends store under it): a look-up with it matches a key by identity, without
        reading the key's characters, which sends spread over many topics find out of the caches."""
        return sys.intern(name)


class DataVersion(JsonBody):
    """A change counter with the time of the last change; peers compare whole versions."""

    counter: int = 0
    timestamp: int = Field(default_factory=lambda: int(time.time() * 1000))

    def next_version(self) -> None:
        self.timestamp = int(time.time() * 1000)
        self.counter += 1

    def assign(self, other: DataVersion) -> None:
        self.counter = other.counter
        self.timestamp = other.timestamp


class TopicConfigSerializeWrapper(JsonBody):
    dataVersion: DataVersion = Field(default_factory=DataVersion)
    topicConfigTable: dict[str, TopicConfig] = Field(default_factory=dict)
