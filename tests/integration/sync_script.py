"""A plain script with no event loop of its own, using the blocking facade."""

import sys

from client import Message
from client.sync import BlockingLitePullConsumer, BlockingProducer
from remoting.protocol.heartbeat import ConsumeFromWhere

namesrv = sys.argv[1]
with BlockingProducer("pg_sync", namesrv) as producer:
    for i in range(3):
        result = producer.send(Message("SyncTopic", f"sync-{i}".encode()))
        print("SENT", result.send_status.value, result.msg_id, flush=True)

consumer = BlockingLitePullConsumer("cg_sync", namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                                    rebalance_interval=1.0)
consumer.subscribe("SyncTopic")
with consumer:
    got: list[bytes] = []
    for _ in range(40):
        got.extend(m.body for m in consumer.poll(0.5))
        if len(got) >= 3:
            break
print("GOT", b",".join(sorted(got)).decode(), flush=True)
