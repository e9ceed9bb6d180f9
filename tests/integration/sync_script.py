"""A plain script with no event loop of its own, using the blocking facade."""

import sys

from rocketmq_py.client import Message
from rocketmq_py.client.sync import BlockingLitePullConsumer, BlockingProducer
from rocketmq_py.remoting.protocol.heartbeat import ConsumeFromWhere


def consume_from_first(group: str, namesrv: str, topic: str, count: int, polls: int = 60) -> list[bytes]:
    """The sorted bodies a blocking consumer reads from the start of ``topic``: ``count`` of them,
    or what it got in ``polls`` half-second polls."""
    consumer = BlockingLitePullConsumer(group, namesrv, rebalance_interval=1.0,
                                        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(topic)
    with consumer:
        got: list[bytes] = []
        for _ in range(polls):
            got.extend(m.body for m in consumer.poll(0.5))
            if len(got) >= count:
                break
    return sorted(got)


if __name__ == "__main__":
    namesrv = sys.argv[1]
    with BlockingProducer("pg_sync", namesrv) as producer:
        for i in range(3):
            result = producer.send(Message("SyncTopic", f"sync-{i}".encode()))
            print("SENT", result.send_status.value, result.msg_id, flush=True)
    print("GOT", b",".join(consume_from_first("cg_sync", namesrv, "SyncTopic", 3)).decode(), flush=True)
