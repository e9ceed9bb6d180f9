"""The driver side: a topic's queues, their offset bounds, and option specs resolved to offsets.

Planning asks the NameServer for the route (queues and masters) and each master for its
queues' min/max offsets (GET_TOPIC_STATS_INFO), and resolves timestamps with
SEARCH_OFFSET_BY_TIMESTAMP, through the SDK's Admin on its background loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketmq_py.acl.session_credentials import SessionCredentials
from rocketmq_py.client.admin import Admin
from rocketmq_py.client.allocate import MessageQueue
from rocketmq_py.client.errors import MQClientError
from rocketmq_py.client.spark.options import EARLIEST, LATEST, OffsetSpec, OptionError, queue_key
from rocketmq_py.client.sync import run_sync
from rocketmq_py.remoting.protocol.route import MASTER_ID
from rocketmq_py.remoting.protocol.topic import PermName


@dataclass(frozen=True)
class QueueState:
    mq: MessageQueue
    broker_addr: str
    min_offset: int
    max_offset: int


async def _admin(namesrv: str, timeout: float, credentials: SessionCredentials | None) -> Admin:
    admin = Admin(namesrv, timeout=timeout, instance_name="spark-driver", session_credentials=credentials)
    await admin.start()
    return admin


class TopicView:
    """A started Admin for one topic; ``close()`` it when planning (or the stream) ends."""

    def __init__(self, namesrv_addr: str, topic: str, timeout: float = 10.0,
                 credentials: SessionCredentials | None = None) -> None:
        self.topic = topic
        self.admin = run_sync(_admin(namesrv_addr, timeout, credentials))

    def close(self) -> None:
        run_sync(self.admin.shutdown())

    def queues(self) -> dict[str, QueueState]:
        """Every readable queue of the topic by ``brokerName:queueId``, with its offset bounds now."""
        return run_sync(self._queues())

    async def _queues(self) -> dict[str, QueueState]:
        route = await self.admin.examine_topic_route_info(self.topic)
        masters = {bd.brokerName: bd.brokerAddrs[MASTER_ID] for bd in route.brokerDatas if MASTER_ID in bd.brokerAddrs}
        stats = await self.admin.examine_topic_stats(self.topic)
        out: dict[str, QueueState] = {}
        for qd in route.queueDatas:
            if not PermName.is_readable(qd.perm) or qd.brokerName not in masters:
                continue
            for qid in range(qd.readQueueNums):
                mq = MessageQueue(self.topic, qd.brokerName, qid)
                bounds = stats.get(mq)
                out[queue_key(mq)] = QueueState(mq, masters[qd.brokerName], bounds.min_offset if bounds else 0,
                                                bounds.max_offset if bounds else 0)
        if not out:
            raise MQClientError(f"topic {self.topic} has no readable queue with a master broker")
        return out

    def search_offsets(self, queues: dict[str, QueueState], timestamp: int) -> dict[str, int]:
        async def run() -> dict[str, int]:
            return {key: await self.admin.search_offset(q.mq, timestamp) for key, q in queues.items()}
        return run_sync(run())

    def commit(self, group: str, offsets: dict[str, int], queues: dict[str, QueueState]) -> None:
        async def run() -> None:
            for key, offset in offsets.items():
                if key in queues:
                    await self.admin.update_consumer_offset(group, queues[key].mq, offset)
        run_sync(run())


def resolve(spec: OffsetSpec, timestamp: int | None, queues: dict[str, QueueState], view: TopicView,
            name: str) -> dict[str, int]:
    """Per queue, the offset a starting/ending option names: a timestamp wins, then the spec;
    JSON maps may leave queues out (they take earliest for a start, latest for an end)."""
    if timestamp is not None:
        return view.search_offsets(queues, timestamp)
    is_start = name.startswith("starting")
    if isinstance(spec, str):
        return {k: (q.min_offset if spec == EARLIEST else q.max_offset) for k, q in queues.items()}
    unknown = sorted(set(spec) - set(queues))
    if unknown:
        raise OptionError(f"{name} names queues the topic does not have: {unknown}; it has {sorted(queues)}")
    out = {}
    for k, q in queues.items():
        value = spec.get(k, -2 if is_start else -1)
        out[k] = q.min_offset if value == -2 else q.max_offset if value == -1 else value
    return out


__all__ = ["EARLIEST", "LATEST", "QueueState", "TopicView", "resolve"]
