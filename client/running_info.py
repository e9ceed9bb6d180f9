"""ConsumerRunningInfo: what a consumer answers to GET_CONSUMER_RUNNING_INFO (mqadmin
consumerStatus / consumerRunningInfo), with Java's field and property names so Java tools can
read it, and the reader the Admin API uses on the way back.

The body is fastjson's: ``mqTable`` is keyed by MessageQueue objects, which plain JSON cannot
express, so it is written and read with the MQ-keyed helpers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rocketmq_py.client.allocate import MessageQueue
from rocketmq_py.remoting.protocol.broker import decode_mq_keyed, encode_mq_keyed

PROP_NAMESERVER_ADDR = "PROP_NAMESERVER_ADDR"
PROP_THREADPOOL_CORE_SIZE = "PROP_THREADPOOL_CORE_SIZE"
PROP_CONSUME_ORDERLY = "PROP_CONSUMEORDERLY"
PROP_CONSUME_TYPE = "PROP_CONSUME_TYPE"
PROP_CLIENT_VERSION = "PROP_CLIENT_VERSION"
PROP_CONSUMER_START_TIMESTAMP = "PROP_CONSUMER_START_TIMESTAMP"
CLIENT_VERSION_DESC = "V4_9_8"  # MQVersion.getVersionDesc of the version this SDK speaks


def process_queue_info(commit_offset: int, min_offset: int = 0, max_offset: int = 0, count: int = 0,
                       size_mib: int = 0, locked: bool = False, last_lock: int = 0, dropped: bool = False,
                       last_pull: int = 0, last_consume: int = 0) -> dict[str, Any]:
    """Java's ProcessQueueInfo, field for field (transaction fields unused by plain consumers)."""
    return {"cachedMsgCount": count, "cachedMsgMaxOffset": max_offset, "cachedMsgMinOffset": min_offset,
            "cachedMsgSizeInMiB": size_mib, "commitOffset": commit_offset, "droped": dropped,
            "lastConsumeTimestamp": last_consume, "lastLockTimestamp": last_lock,
            "lastPullTimestamp": last_pull, "locked": locked, "transactionMsgCount": 0,
            "transactionMsgMaxOffset": 0, "transactionMsgMinOffset": 0, "tryUnlockTimes": 0}


def consume_status() -> dict[str, float | int]:
    """Java's ConsumeStatus. This SDK keeps no per-topic RT/TPS statistics yet: all zero."""
    return {"consumeFailedMsgs": 0, "consumeFailedTPS": 0.0, "consumeOKTPS": 0.0, "consumeRT": 0.0,
            "pullRT": 0.0, "pullTPS": 0.0}


def encode_running_info(properties: dict[str, str], subscriptions: list[bytes],
                        mq_table: dict[MessageQueue, dict[str, Any]], topics: list[str]) -> bytes:
    """fastjson's field order (alphabetical): mqTable, properties, statusTable, subscriptionSet."""
    keyed = {(mq.topic, mq.broker_name, mq.queue_id): v for mq, v in sorted(mq_table.items())}
    mq_part = encode_mq_keyed("mqTable", keyed)[:-1]
    rest = (f',"properties":{json.dumps(properties, separators=(",", ":"))}'
            f',"statusTable":{json.dumps({t: consume_status() for t in sorted(topics)}, separators=(",", ":"))}'
            f',"subscriptionSet":[{",".join(s.decode() for s in subscriptions)}]}}')
    return mq_part + rest.encode()


@dataclass
class ConsumerRunningInfo:
    properties: dict[str, str] = field(default_factory=dict)
    subscription_set: list[dict[str, Any]] = field(default_factory=list)
    mq_table: dict[MessageQueue, dict[str, Any]] = field(default_factory=dict)
    status_table: dict[str, dict[str, Any]] = field(default_factory=dict)
    jstack: str | None = None

    @classmethod
    def decode(cls, body: bytes) -> ConsumerRunningInfo:
        text = body.decode()
        decoder = json.JSONDecoder()
        info = cls(mq_table={MessageQueue(*k): v for k, v in decode_mq_keyed(body, "mqTable").items()}
                   if '"mqTable"' in text else {})

        def field_value(name: str) -> Any:
            # Top-level fields come after mqTable's object keys; read each from its own position.
            at = text.rfind(f'"{name}":')
            return decoder.raw_decode(text, at + len(name) + 3)[0] if at >= 0 else None

        info.properties = field_value("properties") or {}
        info.subscription_set = field_value("subscriptionSet") or []
        info.status_table = field_value("statusTable") or {}
        info.jstack = field_value("jstack")
        return info
