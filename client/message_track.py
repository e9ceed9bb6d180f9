"""Which consumer groups have consumed a message: Java's MessageTrack, as ``mqadmin queryMsgById``
and ``queryMsgByOffset`` print it after the message.

The groups are those the message's brokers know for its topic (QUERY_TOPIC_CONSUME_BY_WHO); an
online push group has consumed the message when its committed offset on the message's queue,
at the broker that stored it, is past the message's queue offset (DefaultMQAdminExtImpl.consumed).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from rocketmq_py.client.errors import MQClientError
from rocketmq_py.remoting.codes import ResponseCode
from rocketmq_py.remoting.protocol.heartbeat import ConsumeType
from rocketmq_py.remoting.protocol.message import MessageExt
from rocketmq_py.remoting.protocol.route import MASTER_ID

if TYPE_CHECKING:
    from rocketmq_py.client.admin import Admin


class TrackType(StrEnum):
    CONSUMED = "CONSUMED"
    CONSUMED_BUT_FILTERED = "CONSUMED_BUT_FILTERED"
    PULL = "PULL"
    NOT_CONSUME_YET = "NOT_CONSUME_YET"
    NOT_ONLINE = "NOT_ONLINE"
    UNKNOWN = "UNKNOWN"


@dataclass
class MessageTrack:
    consumer_group: str
    track_type: TrackType = TrackType.UNKNOWN
    exception_desc: str | None = None

    def __str__(self) -> str:
        return (f"MessageTrack [consumerGroup={self.consumer_group}, trackType={self.track_type}, "
                f"exceptionDesc={self.exception_desc}]")


def _desc(exc: MQClientError) -> str:
    return f"CODE:{exc.code} DESC:{exc.remark}" if exc.code is not None else str(exc)


async def consumed(admin: Admin, msg: MessageExt, group: str) -> bool:
    """Whether ``group`` has committed past ``msg`` on its queue at the broker that stored it."""
    stats = await admin.examine_consume_stats(group, msg.topic)
    info = await admin.examine_broker_cluster_info()
    store_addr = f"{msg.store_host[0]}:{msg.store_host[1]}"
    for mq, wrapper in stats.items():
        if mq.topic != msg.topic or mq.queue_id != msg.queue_id:
            continue
        broker = info.brokerAddrTable.get(mq.broker_name)
        if broker is not None and broker.brokerAddrs.get(MASTER_ID) == store_addr \
                and wrapper.consumer_offset > msg.queue_offset:
            return True
    return False


async def message_track_detail(admin: Admin, msg: MessageExt) -> list[MessageTrack]:
    """Each group consuming the message's topic, with whether it has consumed the message."""
    tracks = []
    for group in await admin.query_topic_consume_by_who(msg.topic):
        track = MessageTrack(group)
        tracks.append(track)
        try:
            connection = await admin.examine_consumer_connection_info(group)
        except MQClientError as exc:
            if exc.code == ResponseCode.CONSUMER_NOT_ONLINE:
                track.track_type = TrackType.NOT_ONLINE
            track.exception_desc = _desc(exc)
            continue
        if connection.get("consumeType") == ConsumeType.CONSUME_ACTIVELY:
            track.track_type = TrackType.PULL
            continue
        if connection.get("consumeType") != ConsumeType.CONSUME_PASSIVELY:
            continue
        try:
            done = await consumed(admin, msg, group)
        except MQClientError as exc:
            if exc.code == ResponseCode.CONSUMER_NOT_ONLINE:
                track.track_type = TrackType.NOT_ONLINE
            track.exception_desc = _desc(exc)
            continue
        if not done:
            track.track_type = TrackType.NOT_CONSUME_YET
            continue
        track.track_type = TrackType.CONSUMED
        sub = connection.get("subscriptionTable", {}).get(msg.topic)
        if sub is not None:
            tags = set(sub.get("tagsSet") or [])
            if tags and msg.tags not in tags and "*" not in tags:
                track.track_type = TrackType.CONSUMED_BUT_FILTERED
    return tracks
