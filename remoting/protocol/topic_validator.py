"""Java's TopicValidator facts: which topic and group names are legal, which topics are the
broker's own (4.9.7 ``org.apache.rocketmq.common.topic.TopicValidator``).

Shared by every side that checks a name, so a producer refuses at the call what a broker would
refuse after a round trip.
"""

from __future__ import annotations

import re

AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
RMQ_SYS_SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
RMQ_SYS_BENCHMARK_TOPIC = "BenchmarkTest"
RMQ_SYS_TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
RMQ_SYS_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
RMQ_SYS_TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
RMQ_SYS_SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
RMQ_SYS_OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"

# Topics and groups are at most this long (Validators.TOPIC_MAX_LENGTH, CHARACTER_MAX_LENGTH).
TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 255
VALID_PATTERN = "^[%|a-zA-Z0-9_-]+$"
# ASCII only: Java's bit map has 128 entries, so any other character is illegal.
_LEGAL = re.compile(r"[%|a-zA-Z0-9_-]+", re.ASCII)

SYSTEM_TOPICS = frozenset({
    AUTO_CREATE_TOPIC_KEY_TOPIC, RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_BENCHMARK_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRACE_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC, RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, RMQ_SYS_SELF_TEST_TOPIC,
    RMQ_SYS_OFFSET_MOVED_EVENT})
# The broker's internal topics, which no client may send to (NOT_ALLOWED_SEND_TOPIC_SET).
NOT_ALLOWED_SEND_TOPICS = frozenset({
    RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, RMQ_SYS_SELF_TEST_TOPIC, RMQ_SYS_OFFSET_MOVED_EVENT})


def is_topic_or_group_illegal(name: str) -> bool:
    """True when ``name`` holds a character outside ``^[%|a-zA-Z0-9_-]+$`` (an empty name is
    the blank check's to refuse)."""
    return bool(name) and _LEGAL.fullmatch(name) is None


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def is_not_allowed_send_topic(topic: str) -> bool:
    return topic in NOT_ALLOWED_SEND_TOPICS
