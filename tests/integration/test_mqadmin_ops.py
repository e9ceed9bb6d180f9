"""mqadmin's operations commands against a real NameServer and broker (subprocesses, one pair for
the module), each with its error path: statsAll, brokerConsumeStats, consumerStatus,
getConsumerConfig, cloneGroupOffset, updateTopicPerm, updateOrderConf, allocateMQ,
printMsgByQueue, checkMsgSendRT, getNamesrvConfig, updateNamesrvConfig, topicClusterList,
cleanUnusedTopic, queryCq, skipAccumulatedMessage; queryMsgById by unique key;
updateBrokerConfig applying store keys or refusing; --json numbers; bare commands' help.

The commands run in-process (typer's runner: the same code as the console script, without an
interpreter start per call); the bare-command test runs the real executables."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from typer.testing import CliRunner

from rocketmq_py.client import Message, Producer
from rocketmq_py.client.admin import Admin
from rocketmq_py.client.allocate import MessageQueue
from rocketmq_py.client.errors import MQClientError
from rocketmq_py.client.lite_pull_consumer import LitePullConsumer
from rocketmq_py.remoting.protocol.heartbeat import ConsumeFromWhere
from rocketmq_py.tools.mqadmin import app
from tests.integration.cli import run_cli
from tests.integration.daemons import Daemon
from tests.waiting import poll_count

RUNNER = CliRunner()


def mq(*args: str) -> str:
    """Run an mqadmin command that must succeed; its stdout."""
    result = RUNNER.invoke(app, list(args))
    assert result.exit_code == 0, f"{args} exited {result.exit_code}: {result.stderr}{result.stdout}"
    return result.stdout


def mq_json(*args: str) -> Any:
    return json.loads(mq(*args, "--json"))


def mq_fails(*args: str, fragment: str) -> str:
    """Run an mqadmin command that must fail with exit 1 and one stderr line holding ``fragment``."""
    result = RUNNER.invoke(app, list(args))
    assert result.exit_code == 1, f"{args} should fail, exited {result.exit_code}: {result.stdout}"
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    assert fragment in lines[0], lines[0]
    assert lines[0].startswith(f"mqadmin {args[0]}:"), lines[0]
    return lines[0]


def topic(ns: Daemon, name: str, count: int, queues: int = 2, tags: str = "TagA") -> list[str]:
    """A topic with ``count`` messages; their unique-key ids."""
    mq("updateTopic", "-t", name, "-c", "DefaultCluster", "-r", str(queues), "-w", str(queues), "-n", ns.addr)

    async def send() -> list[str]:
        async with Producer(f"{name}_producer", ns.addr) as producer:
            return [(await producer.send(Message(name, f"body-{i}".encode(), tags=tags, keys=f"k{i}"))).msg_id
                    for i in range(count)]

    return asyncio.run(send())


def commit(ns: Daemon, group: str, name: str, offsets: dict[int, int]) -> None:
    async def job() -> None:
        async with Admin(ns.addr) as admin:
            for qid, offset in offsets.items():
                await admin.update_consumer_offset(group, MessageQueue(name, "broker-a", qid), offset)

    asyncio.run(job())


def committed(ns: Daemon, group: str, name: str) -> dict[int, int]:
    async def job() -> dict[int, int]:
        async with Admin(ns.addr) as admin:
            return {q.queue_id: w.consumer_offset for q, w in (await admin.examine_consume_stats(group, name)).items()}

    return asyncio.run(job())


def test_bare_commands_print_help_and_exit_0() -> None:
    for tool, word in (("mqadmin", "clusterList"), ("mqbench", "produce"), ("mqcluster", "up")):
        result = run_cli(tool)
        assert result.returncode == 0, (tool, result.stderr)
        assert "Usage" in result.stdout and word in result.stdout
        assert result.stderr.strip() == "", result.stderr


def test_update_broker_config_applies_store_keys_or_refuses(cluster: tuple[Daemon, Daemon]) -> None:
    ns, broker = cluster
    b = ("-b", broker.addr, "-n", ns.addr)
    mq("updateBrokerConfig", "-k", "fileReservedTime", "-v", "1", *b)
    config = mq_json("getBrokerConfig", *b)[broker.addr]
    assert config["fileReservedTime"] == 1 and isinstance(config["brokerId"], int)
    assert config["deleteWhen"] == "04"  # text with a leading zero stays text

    # The store reads maxMessageSize where it checks a put: lowered, a larger body is refused.
    topic(ns, "OpsSize", 0)
    mq("updateBrokerConfig", "-k", "maxMessageSize", "-v", "1024", *b)

    async def send_big() -> str:
        async with Producer("ops_size_producer", ns.addr, retry_times_when_send_failed=0) as producer:
            try:
                await producer.send(Message("OpsSize", b"x" * 2000))
            except MQClientError as exc:
                return str(exc)
            return "stored"

    assert asyncio.run(send_big()) != "stored"
    mq("updateBrokerConfig", "-k", "maxMessageSize", "-v", str(4 * 1024 * 1024), *b)
    assert asyncio.run(send_big()) == "stored"

    mq_fails("updateBrokerConfig", "-k", "maxMessageSize", "-v", "abc", *b, fragment="maxMessageSize")
    mq_fails("updateBrokerConfig", "-k", "brokerName", "-v", "other", *b, fragment="start-up")
    mq_fails("updateBrokerConfig", "-k", "listenPort", "-v", "1", *b, fragment="listenPort")
    mq_fails("updateBrokerConfig", "-k", "noSuchKey", "-v", "1", *b, fragment="unknown config key")
    after = mq_json("getBrokerConfig", *b)[broker.addr]
    assert after["maxMessageSize"] == 4 * 1024 * 1024 and after["brokerName"] == "broker-a"
    status = mq_json("brokerStatus", *b)[broker.addr]
    assert isinstance(status["msgPutTotalTodayNow"], int) and isinstance(status["bootTimestamp"], int)


def test_query_msg_by_id_finds_a_unique_key_on_every_broker(cluster: tuple[Daemon, Daemon]) -> None:
    ns, _ = cluster
    ids = topic(ns, "OpsUniq", 3)
    found = mq_json("queryMsgById", "-i", ids[1], "-n", ns.addr)
    assert found["msgId"] == ids[1] and found["topic"] == "OpsUniq" and found["body"] == "body-1"
    assert mq_json("queryMsgById", "-i", ids[2], "-t", "OpsUniq", "-n", ns.addr)["body"] == "body-2"
    by_offset = mq_json("queryMsgById", "-i", found["offsetMsgId"], "-n", ns.addr)
    assert by_offset["msgId"] == ids[1]
    unknown = ids[0][:-4] + ("0000" if not ids[0].endswith("0000") else "0001")
    mq_fails("queryMsgById", "-i", unknown, "-n", ns.addr, fragment="not found")


def test_stats_all_and_broker_consume_stats(cluster: tuple[Daemon, Daemon]) -> None:
    ns, broker = cluster
    topic(ns, "OpsStats", 6)
    # A subscription group (brokerConsumeStats walks the broker's groups) with committed offsets.
    mq("updateSubGroup", "-g", "ops_stats_group", "-b", broker.addr, "-n", ns.addr)
    commit(ns, "ops_stats_group", "OpsStats", {0: 1, 1: 1})
    rows = mq_json("statsAll", "-t", "OpsStats", "-n", ns.addr)
    row = next(r for r in rows if r["consumerGroup"] == "ops_stats_group")
    assert row["accumulation"] == 4 and isinstance(row["inTps"], float)
    assert "OpsStats" in mq("statsAll", "-t", "OpsStats", "-n", ns.addr)
    mq_fails("statsAll", "-t", "NoSuchOpsTopic", "-n", ns.addr, fragment="NoSuchOpsTopic")

    stats = mq_json("brokerConsumeStats", "-b", broker.addr, "-n", ns.addr)
    mine = [q for q in stats["queues"] if q["group"] == "ops_stats_group"]
    assert sorted((q["queueId"], q["consumerOffset"]) for q in mine) == [(0, 1), (1, 1)]
    assert sum(q["diff"] for q in mine) == 4 and stats["totalDiff"] >= 4
    assert [q for q in mq_json("brokerConsumeStats", "-b", broker.addr, "-l", "3", "-n", ns.addr)["queues"]
            if q["group"] == "ops_stats_group"] == []
    assert "Diff Total:" in mq("brokerConsumeStats", "-b", broker.addr, "-n", ns.addr)
    mq_fails("brokerConsumeStats", "-b", "127.0.0.1:1", "-n", ns.addr, fragment="127.0.0.1:1")
    mq_fails("brokerConsumeStats", "-b", broker.addr, "-o", "maybe", "-n", ns.addr, fragment="-o")


def test_clone_and_skip_offsets(cluster: tuple[Daemon, Daemon]) -> None:
    ns, _ = cluster
    topic(ns, "OpsClone", 4)
    commit(ns, "ops_src", "OpsClone", {0: 2, 1: 1})
    out = mq_json("cloneGroupOffset", "-s", "ops_src", "-d", "ops_dest", "-t", "OpsClone", "-n", ns.addr)
    assert {(q["queueId"], q["offset"]) for q in out["queues"]} == {(0, 2), (1, 1)}
    assert committed(ns, "ops_dest", "OpsClone") == {0: 2, 1: 1}
    mq_fails("cloneGroupOffset", "-s", "ops_nobody", "-d", "ops_dest2", "-t", "OpsClone", "-n", ns.addr,
             fragment="ops_nobody")

    skipped = mq_json("skipAccumulatedMessage", "-g", "ops_dest", "-t", "OpsClone", "-n", ns.addr)
    assert sum(q["offset"] for q in skipped["queues"]) == 4
    assert sum(committed(ns, "ops_dest", "OpsClone").values()) == 4
    mq_fails("skipAccumulatedMessage", "-g", "ops_dest", "-t", "NoSuchOpsTopic", "-n", ns.addr,
             fragment="NoSuchOpsTopic")


def test_consumer_status_and_config(cluster: tuple[Daemon, Daemon]) -> None:
    ns, broker = cluster
    topic(ns, "OpsStatus", 2)
    mq("updateSubGroup", "-g", "ops_status_group", "-c", "DefaultCluster", "-r", "7", "-n", ns.addr)
    configs = mq_json("getConsumerConfig", "-g", "ops_status_group", "-n", ns.addr)
    assert [(c["brokerName"], c["clusterName"], c["subscriptionGroupConfig"]["retryMaxTimes"]) for c in configs] == \
        [("broker-a", "DefaultCluster", 7)]
    assert "retryMaxTimes" in mq("getConsumerConfig", "-g", "ops_status_group", "-n", ns.addr)
    mq_fails("getConsumerConfig", "-g", "ops_no_group", "-n", ns.addr, fragment="ops_no_group")

    async def with_consumer() -> tuple[Any, Any]:
        consumer = LitePullConsumer("ops_status_group", ns.addr,
                                    consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        consumer.subscribe("OpsStatus")
        async with consumer:
            await poll_count(consumer, 2, 20)
            listed = await asyncio.to_thread(RUNNER.invoke, app, ["consumerStatus", "-g", "ops_status_group",
                                                                  "--json", "-n", ns.addr])
            table = await asyncio.to_thread(RUNNER.invoke, app, ["consumerStatus", "-g", "ops_status_group",
                                                                 "-b", broker.addr, "-n", ns.addr])
            return listed, table

    listed, table = asyncio.run(with_consumer())
    assert listed.exit_code == 0, listed.stderr
    infos = json.loads(listed.stdout)
    assert len(infos) == 1
    info = next(iter(infos.values()))
    assert {s["topic"] for s in info["subscriptionSet"]} >= {"OpsStatus"}
    assert table.exit_code == 0 and "Same subscription" in table.stdout and "Rebalance OK" in table.stdout
    mq_fails("consumerStatus", "-g", "ops_status_group", "-n", ns.addr, fragment="not online")


def test_topic_perm_order_conf_allocate_and_clusters(cluster: tuple[Daemon, Daemon]) -> None:
    ns, broker = cluster
    topic(ns, "OpsPerm", 0, queues=4)
    out = mq_json("updateTopicPerm", "-t", "OpsPerm", "-p", "4", "-b", broker.addr, "-n", ns.addr)
    assert out["brokers"] == [{"brokerAddr": broker.addr, "oldPerm": 6, "perm": 4}]
    assert mq_json("topicRoute", "-t", "OpsPerm", "-n", ns.addr)["queueDatas"][0]["perm"] == 4
    mq_fails("updateTopicPerm", "-t", "OpsPerm", "-p", "4", "-b", broker.addr, "-n", ns.addr, fragment="old one")
    mq_fails("updateTopicPerm", "-t", "OpsPerm", "-p", "5", "-c", "DefaultCluster", "-n", ns.addr, fragment="-p")
    assert "from 4 to 6" in mq("updateTopicPerm", "-t", "OpsPerm", "-p", "6", "-c", "DefaultCluster", "-n", ns.addr)

    allocated = mq_json("allocateMQ", "-t", "OpsPerm", "-i", "10.0.0.1,10.0.0.2", "-n", ns.addr)["result"]
    assert sorted(q["queueId"] for qs in allocated.values() for q in qs) == [0, 1, 2, 3]
    assert [len(allocated["10.0.0.1"]), len(allocated["10.0.0.2"])] == [2, 2]
    mq_fails("allocateMQ", "-t", "OpsPerm", "-i", ",", "-n", ns.addr, fragment="-i")

    assert mq_json("topicClusterList", "-t", "OpsPerm", "-n", ns.addr) == ["DefaultCluster"]
    assert mq("topicClusterList", "-t", "OpsPerm", "-n", ns.addr).strip() == "DefaultCluster"
    mq_fails("topicClusterList", "-t", "NoSuchOpsTopic", "-n", ns.addr, fragment="NoSuchOpsTopic")

    mq("updateOrderConf", "-t", "OpsPerm", "-m", "put", "-v", "broker-a:4", "-n", ns.addr)
    assert mq_json("updateOrderConf", "-t", "OpsPerm", "-m", "get", "-n", ns.addr)["orderConf"] == "broker-a:4"
    mq_fails("updateOrderConf", "-t", "OpsPerm", "-m", "put", "-v", "broker-a", "-n", ns.addr, fragment="broker-a")
    mq_fails("updateOrderConf", "-t", "OpsPerm", "-m", "drop", "-n", ns.addr, fragment="-m")
    mq("updateOrderConf", "-t", "OpsPerm", "-m", "delete", "-n", ns.addr)
    mq_fails("updateOrderConf", "-t", "OpsPerm", "-m", "get", "-n", ns.addr, fragment="no orderConf")


def test_namesrv_config_commands(cluster: tuple[Daemon, Daemon]) -> None:
    ns, _ = cluster
    configs = mq_json("getNamesrvConfig", "-n", ns.addr)
    assert list(configs) == [ns.addr]
    assert isinstance(configs[ns.addr]["listenPort"], int)
    assert "listenPort" in mq("getNamesrvConfig", "-n", ns.addr)
    before = configs[ns.addr]["orderMessageEnable"]
    mq("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true" if not before else "false", "-n", ns.addr)
    assert mq_json("getNamesrvConfig", "-n", ns.addr)[ns.addr]["orderMessageEnable"] is (not before)
    mq("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true" if before else "false", "-n", ns.addr)
    mq_fails("updateNamesrvConfig", "-k", "noSuchNamesrvKey", "-v", "1", "-n", ns.addr, fragment="noSuchNamesrvKey")


def test_queue_commands(cluster: tuple[Daemon, Daemon]) -> None:
    ns, broker = cluster
    topic(ns, "OpsQueue", 3, queues=1, tags="TagQ")
    units = mq_json("queryCq", "-t", "OpsQueue", "-q", "0", "-i", "0", "-c", "5", "-n", ns.addr)
    assert units["maxQueueIndex"] == 3 and len(units["queueData"]) == 3
    assert all(u["physicSize"] > 0 for u in units["queueData"])
    assert "idx: 2" in mq("queryCq", "-t", "OpsQueue", "-q", "0", "-i", "0", "-b", broker.addr, "-n", ns.addr)
    mq_fails("queryCq", "-t", "NoSuchOpsTopic", "-q", "0", "-i", "0", "-n", ns.addr, fragment="NoSuchOpsTopic")

    printed = mq_json("printMsgByQueue", "-t", "OpsQueue", "-a", "broker-a", "-i", "0", "-p", "true", "-d", "true",
                      "-f", "true", "-n", ns.addr)
    assert printed["count"] == 3 and printed["tagCounts"] == {"TagQ": 3}
    assert [m["body"] for m in printed["messages"]] == ["body-0", "body-1", "body-2"]
    assert "Tag: TagQ" in mq("printMsgByQueue", "-t", "OpsQueue", "-a", "broker-a", "-i", "0", "-f", "true",
                             "-n", ns.addr)
    mq_fails("printMsgByQueue", "-t", "OpsQueue", "-a", "broker-z", "-i", "0", "-n", ns.addr, fragment="broker-z")

    rt = mq_json("checkMsgSendRT", "-t", "OpsQueue", "-a", "4", "-s", "16", "-n", ns.addr)
    assert [s["sendResult"] for s in rt["sends"]] == [True] * 4 and rt["avgRtMs"] >= 0
    assert "Avg RT:" in mq("checkMsgSendRT", "-t", "OpsQueue", "-a", "2", "-n", ns.addr)
    mq_fails("checkMsgSendRT", "-t", "OpsQueue", "-a", "1", "-n", ns.addr, fragment="-a")

    assert mq("cleanUnusedTopic", "-b", broker.addr, "-n", ns.addr).strip() == "success"
    assert mq_json("cleanUnusedTopic", "-c", "DefaultCluster", "-n", ns.addr)["brokers"] == [broker.addr]
    mq_fails("cleanUnusedTopic", "-n", ns.addr, fragment="-b")
