"""Message tracking (Java's DefaultMQAdminExtImpl.messageTrackDetail) over a stand-in Admin."""

from __future__ import annotations

from typing import Any

from rocketmq_py.client.admin import OffsetWrapper
from rocketmq_py.client.allocate import MessageQueue
from rocketmq_py.client.errors import MQClientError
from rocketmq_py.client.message_track import TrackType, message_track_detail
from rocketmq_py.remoting.codes import ResponseCode
from rocketmq_py.remoting.protocol.message import MessageExt
from rocketmq_py.remoting.protocol.route import BrokerData, ClusterInfo

STORE = ("10.0.0.1", 10911)


class FakeAdmin:
    def __init__(self, groups: dict[str, dict[str, Any] | None], offsets: dict[str, int]) -> None:
        self.groups = groups
        self.offsets = offsets

    async def query_topic_consume_by_who(self, topic: str) -> list[str]:
        return sorted(self.groups)

    async def examine_consumer_connection_info(self, group: str) -> dict[str, Any]:
        info = self.groups[group]
        if info is None:
            raise MQClientError("offline", ResponseCode.CONSUMER_NOT_ONLINE, "the consumer group not online")
        return info

    async def examine_consume_stats(self, group: str, topic: str | None = None) -> dict[MessageQueue, OffsetWrapper]:
        return {MessageQueue("T", "broker-a", 1): OffsetWrapper(10, self.offsets[group], 0),
                MessageQueue("T", "broker-a", 0): OffsetWrapper(10, 10, 0)}

    async def examine_broker_cluster_info(self) -> ClusterInfo:
        return ClusterInfo(brokerAddrTable={"broker-a": BrokerData(brokerName="broker-a", cluster="C",
                                                                    brokerAddrs={0: "10.0.0.1:10911"})})


def _push(tags: list[str]) -> dict[str, Any]:
    return {"consumeType": "CONSUME_PASSIVELY", "subscriptionTable": {"T": {"topic": "T", "tagsSet": tags}}}


async def test_each_track_type() -> None:
    msg = MessageExt(topic="T", body=b"", queue_id=1, queue_offset=5, store_host=STORE, properties={"TAGS": "a"})
    admin = FakeAdmin({"g_done": _push([]), "g_filtered": _push(["b"]), "g_behind": _push(["a"]),
                       "g_pull": {"consumeType": "CONSUME_ACTIVELY"}, "g_off": None},
                      {"g_done": 6, "g_filtered": 9, "g_behind": 5})
    tracks = {t.consumer_group: t for t in await message_track_detail(admin, msg)}  # type: ignore[arg-type]
    assert {g: t.track_type for g, t in tracks.items()} == {
        "g_done": TrackType.CONSUMED, "g_filtered": TrackType.CONSUMED_BUT_FILTERED,
        "g_behind": TrackType.NOT_CONSUME_YET, "g_pull": TrackType.PULL, "g_off": TrackType.NOT_ONLINE}
    assert tracks["g_off"].exception_desc == "CODE:206 DESC:the consumer group not online"
    assert str(tracks["g_pull"]) == "MessageTrack [consumerGroup=g_pull, trackType=PULL, exceptionDesc=None]"


async def test_another_brokers_copy_is_not_consumed() -> None:
    """The offset counts only at the broker that stored the message (its store host)."""
    msg = MessageExt(topic="T", body=b"", queue_id=1, queue_offset=5, store_host=("10.0.0.2", 10911))
    admin = FakeAdmin({"g": _push([])}, {"g": 9})
    (track,) = await message_track_detail(admin, msg)  # type: ignore[arg-type]
    assert track.track_type == TrackType.NOT_CONSUME_YET
