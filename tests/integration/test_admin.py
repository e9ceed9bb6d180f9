"""The Admin API against real daemons: topics, clusters, progress, reset, message queries."""

from __future__ import annotations

import asyncio

import pytest

from rocketmq_py.client import Message, NoRouteError, Producer
from rocketmq_py.client.admin import Admin
from rocketmq_py.client.lite_pull_consumer import LitePullConsumer
from rocketmq_py.remoting.protocol.heartbeat import ConsumeFromWhere
from tests.integration.daemons import DaemonSet
from tests.waiting import poll_count, wait_for_async


async def test_admin_end_to_end(daemons: DaemonSet) -> None:
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr)
    async with Admin(ns.addr) as admin:
        info = await admin.examine_broker_cluster_info()
        assert info.clusterAddrTable == {"DefaultCluster": ["broker-a"]}
        assert await admin.create_topic("AdminTopic", cluster="DefaultCluster", read_queue_nums=2,
                                        write_queue_nums=2) == [broker.addr]
        route = None
        for _ in range(100):  # the broker re-registers at once after a topic change (bounded poll)
            try:
                route = await admin.examine_topic_route_info("AdminTopic")
                break
            except NoRouteError:
                await asyncio.sleep(0.05)
        assert route is not None
        assert route.queueDatas[0].writeQueueNums == 2

        async with Producer("pg_admin", ns.addr) as p:
            sent = [await p.send(Message("AdminTopic", f"a{i}".encode(), keys=f"key-{i}")) for i in range(6)]
        stats = await admin.examine_topic_stats("AdminTopic")
        assert sum(s.max_offset for s in stats.values()) == 6

        consumer = LitePullConsumer("cg_admin", ns.addr, auto_commit=False,
                                    consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        consumer.subscribe("AdminTopic")
        async with consumer:
            await poll_count(consumer, 4, 10)
            await consumer.commit()
            progress = await admin.examine_consume_stats("cg_admin", "AdminTopic")
            assert sum(w.broker_offset for w in progress.values()) == 6
            assert sum(w.lag for w in progress.values()) == 6 - sum(consumer.committed_offsets().values())
            conn = await admin.examine_consumer_connection_info("cg_admin")
            assert conn["connectionSet"][0]["clientId"]

        reset = await admin.reset_offset_by_timestamp("AdminTopic", "cg_admin", 0)
        assert set(reset.values()) == {0}
        assert sum(w.consumer_offset for w in (await admin.examine_consume_stats("cg_admin",
                                                                                 "AdminTopic")).values()) == 0

        by_id = await admin.view_message(sent[2].offset_msg_id)
        assert by_id.body == b"a2"
        # The index is built by a child process that may still be starting on a loaded machine,
        # and a query waits for it a second at most: wait (bounded) until the last send is found.
        async def indexed() -> bool:
            return await admin.query_message_by_unique_key("AdminTopic", sent[5].msg_id) is not None

        assert await wait_for_async(indexed, 30), "the index child did not catch up"
        by_key = await admin.query_message("AdminTopic", "key-4")
        assert [m.body for m in by_key] == [b"a4"]
        by_uniq = await admin.query_message_by_unique_key("AdminTopic", sent[5].msg_id)
        assert by_uniq is not None and by_uniq.body == b"a5"
        q = sent[0].message_queue
        by_offset = await admin.query_message_by_offset("AdminTopic", q.broker_name, q.queue_id, 0)
        assert by_offset is not None and by_offset.queue_offset == 0

        await admin.delete_topic("AdminTopic")
        assert "AdminTopic" not in await admin.fetch_all_topic_list()
        with pytest.raises(NoRouteError, match="AdminTopic"):
            await admin.examine_topic_stats("AdminTopic")
