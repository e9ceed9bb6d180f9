"""Every mqadmin command against real daemons (a NameServer and a broker as subprocesses), each
with its error path: a non-zero exit and exactly one line on stderr saying why."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from rocketmq_py.client import Message, Producer
from rocketmq_py.client.admin import Admin
from rocketmq_py.client.lite_pull_consumer import LitePullConsumer
from rocketmq_py.remoting.protocol.heartbeat import ConsumeFromWhere
from rocketmq_py.tools.mqadmin import app
from tests.integration.cli import run_cli, run_cli_async
from tests.integration.daemons import Daemon, DaemonSet
from tests.waiting import poll_count

COMMANDS = ["updateTopic", "deleteTopic", "topicList", "topicRoute", "topicStatus", "clusterList", "brokerStatus",
            "updateSubGroup", "deleteSubGroup", "consumerProgress", "consumerConnection", "producerConnection",
            "queryMsgById", "queryMsgByKey", "queryMsgByOffset", "printMsg", "resetOffsetByTime", "sendMessage",
            "consumeMessage", "getBrokerConfig", "updateBrokerConfig", "updateKvConfig", "deleteKvConfig",
            "wipeWritePerm", "clusterRT"]

# The smallest valid arguments of each command, for the unreachable-NameServer test.
MINIMAL_ARGS = {
    "updateTopic": ["-t", "T", "-c", "C"], "deleteTopic": ["-t", "T", "-c", "C"], "topicList": [],
    "topicRoute": ["-t", "T"], "topicStatus": ["-t", "T"], "clusterList": [], "brokerStatus": ["-c", "C"],
    "updateSubGroup": ["-g", "G", "-c", "C"], "deleteSubGroup": ["-g", "G", "-c", "C"],
    "consumerProgress": ["-g", "G"], "consumerConnection": ["-g", "G"], "producerConnection": ["-g", "G", "-t", "T"],
    "queryMsgById": ["-i", "{refused_msg_id}", "-t", "T"], "queryMsgByKey": ["-t", "T", "-k", "K"],
    "queryMsgByOffset": ["-t", "T", "-b", "B", "-i", "0", "-o", "0"], "printMsg": ["-t", "T"],
    "resetOffsetByTime": ["-g", "G", "-t", "T", "-s", "now"], "sendMessage": ["-t", "T", "-p", "x"],
    "consumeMessage": ["-t", "T"], "getBrokerConfig": ["-c", "C"],
    "updateBrokerConfig": ["-c", "C", "-k", "k", "-v", "v"],
    "updateKvConfig": ["-s", "S", "-k", "k", "-v", "v"], "deleteKvConfig": ["-s", "S", "-k", "k"],
    "wipeWritePerm": ["-b", "B"], "clusterRT": [],
}


def topic_with_messages(ns: Daemon, topic: str, count: int, queues: int = 2) -> list[dict[str, object]]:
    run_cli("mqadmin", "updateTopic", "-t", topic, "-c", "DefaultCluster", "-r", str(queues), "-w", str(queues),
            "-n", ns.addr).ok()
    return [run_cli("mqadmin", "sendMessage", "-t", topic, "-p", f"body-{i}", "-k", f"{topic}-key-{i}",
                    "-c", "TagA", "--json", "-n", ns.addr).ok().json() for i in range(count)]


# -- every command has --help; usage errors and a missing NameServer are one line ----------------

def test_every_issue_command_is_registered_with_help() -> None:
    runner = CliRunner()
    for name in [*COMMANDS, "benchmark"]:
        result = runner.invoke(app, [name, "--help"])
        assert result.exit_code == 0, (name, result.output)
        assert "Usage" in result.output
    for name in COMMANDS:
        assert "-n" in runner.invoke(app, [name, "--help"]).output or name == "benchmark"


@pytest.mark.parametrize("command", COMMANDS)
def test_unreachable_namesrv_is_one_line_exit_1(command: str, refused_addr: str) -> None:
    # An offset message id names its broker (127.0.0.1 and the port), which queryMsgById asks
    # directly: the id points at the refused address too, not at a port a broker may hold.
    port = int(refused_addr.rsplit(":", 1)[1])
    args = [a.replace("{refused_msg_id}", f"7F000001{port:08X}{0:016X}") for a in MINIMAL_ARGS[command]]
    result = run_cli("mqadmin", command, *args, "-n", refused_addr)
    line = result.failed_with_one_line(f"mqadmin {command}:")
    assert result.returncode == 1, line


def test_no_namesrv_address_and_bad_flags(refused_addr: str) -> None:
    run_cli("mqadmin", "clusterList").failed_with_one_line("NAMESRV_ADDR")
    bad = run_cli("mqadmin", "topicRoute", "--no-such-flag", "-t", "T", "-n", refused_addr)
    assert bad.returncode == 2
    bad.failed_with_one_line("no-such-flag")
    run_cli("mqadmin", "topicRoute", "-n", refused_addr).failed_with_one_line("-t")


# -- topics -------------------------------------------------------------------------------------

def test_topic_commands(cluster: tuple[Daemon, Daemon]) -> None:
    ns, broker = cluster
    created = run_cli("mqadmin", "updateTopic", "-t", "AdmTopic", "-c", "DefaultCluster", "-r", "3", "-w", "3",
                      "--json", "-n", ns.addr).ok().json()
    assert created["brokers"] == [broker.addr]
    by_broker = run_cli("mqadmin", "updateTopic", "-t", "AdmTopic2", "-b", broker.addr, "-n", ns.addr).ok()
    assert f"create topic to {broker.addr} success." in by_broker.stdout
    route = run_cli("mqadmin", "topicRoute", "-t", "AdmTopic", "--json", "-n", ns.addr).ok().json()
    assert route["queueDatas"][0]["writeQueueNums"] == 3
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": broker.addr}
    table = run_cli("mqadmin", "topicRoute", "-t", "AdmTopic", "-n", ns.addr).ok().stdout
    assert "broker-a" in table and broker.addr in table
    assert "AdmTopic" in run_cli("mqadmin", "topicList", "-n", ns.addr).ok().stdout.split()
    listed = run_cli("mqadmin", "topicList", "-c", "--json", "-n", ns.addr).ok().json()
    assert {"topic": "AdmTopic", "cluster": "DefaultCluster", "consumerGroup": ""} in listed
    run_cli("mqadmin", "sendMessage", "-t", "AdmTopic", "-p", "x", "-b", "broker-a", "-i", "1", "-n", ns.addr).ok()
    status = run_cli("mqadmin", "topicStatus", "-t", "AdmTopic", "--json", "-n", ns.addr).ok().json()
    assert [(s["queueId"], s["maxOffset"]) for s in status] == [(0, 0), (1, 1), (2, 0)]
    deleted = run_cli("mqadmin", "deleteTopic", "-t", "AdmTopic", "-c", "DefaultCluster", "-n", ns.addr).ok()
    assert "delete topic [AdmTopic] from cluster [DefaultCluster] success." in deleted.stdout
    assert "AdmTopic" not in run_cli("mqadmin", "topicList", "-n", ns.addr).ok().stdout.split()


def test_topic_command_errors(cluster: tuple[Daemon, Daemon], refused_addr: str) -> None:
    ns, _ = cluster
    run_cli("mqadmin", "updateTopic", "-t", "X", "-n", ns.addr).failed_with_one_line("-b", "-c")
    run_cli("mqadmin", "updateTopic", "-t", "X", "-c", "DefaultCluster", "-p", "5", "-n", ns.addr
            ).failed_with_one_line("-p")
    run_cli("mqadmin", "updateTopic", "-t", "bad topic!", "-c", "DefaultCluster", "-n", ns.addr
            ).failed_with_one_line("updateTopic")
    run_cli("mqadmin", "deleteTopic", "-t", "NoSuchTopic", "-c", "DefaultCluster", "-n", ns.addr
            ).failed_with_one_line("NoSuchTopic")
    run_cli("mqadmin", "topicRoute", "-t", "NoSuchTopic", "-n", ns.addr).failed_with_one_line("NoSuchTopic")
    run_cli("mqadmin", "topicStatus", "-t", "NoSuchTopic", "-n", ns.addr).failed_with_one_line("NoSuchTopic")
    run_cli("mqadmin", "topicList", "-n", refused_addr).failed_with_one_line("topicList")


# -- cluster and brokers ------------------------------------------------------------------------

def test_cluster_and_broker_commands(cluster: tuple[Daemon, Daemon], refused_addr: str) -> None:
    ns, broker = cluster
    rows = run_cli("mqadmin", "clusterList", "--json", "-n", ns.addr).ok().json()
    assert [(r["cluster"], r["brokerName"], r["addr"]) for r in rows] == [("DefaultCluster", "broker-a", broker.addr)]
    assert rows[0]["inTps"] >= 0.0 and (rows[0]["sendQueue"], rows[0]["pageCacheLockTimeMills"]) == (0, 0)
    assert 0 < rows[0]["diskRatio"] < 1
    listed = run_cli("mqadmin", "clusterList", "-n", ns.addr).ok().stdout
    assert "broker-a" in listed and "#InTPS(LOAD)" in listed and "0.00(0,0ms)" in listed
    run_cli("mqadmin", "clusterList", "-c", "NoCluster", "-n", ns.addr).failed_with_one_line("NoCluster")

    status = run_cli("mqadmin", "brokerStatus", "-b", broker.addr, "--json", "-n", ns.addr).ok().json()
    assert status[broker.addr]["brokerVersionDesc"] == "V4_9_8"
    assert "commitLogMaxOffset" in run_cli("mqadmin", "brokerStatus", "-c", "DefaultCluster", "-n", ns.addr).ok().stdout
    run_cli("mqadmin", "brokerStatus", "-n", ns.addr).failed_with_one_line("-b", "-c")
    run_cli("mqadmin", "brokerStatus", "-b", refused_addr, "-n", ns.addr).failed_with_one_line("brokerStatus")

    config = run_cli("mqadmin", "getBrokerConfig", "-b", broker.addr, "--json", "-n", ns.addr).ok().json()
    assert config[broker.addr]["brokerName"] == "broker-a"
    run_cli("mqadmin", "updateBrokerConfig", "-c", "DefaultCluster", "-k", "flushConsumerOffsetInterval",
            "-v", "4321", "-n", ns.addr).ok()
    text = run_cli("mqadmin", "getBrokerConfig", "-c", "DefaultCluster", "-n", ns.addr).ok().stdout
    assert any(ln.split("=")[0].strip() == "flushConsumerOffsetInterval" and ln.endswith("4321")
               for ln in text.splitlines())
    run_cli("mqadmin", "getBrokerConfig", "-n", ns.addr).failed_with_one_line("-b", "-c")
    run_cli("mqadmin", "updateBrokerConfig", "-b", broker.addr, "-k", "noSuchKey", "-v", "1", "-n", ns.addr
            ).failed_with_one_line("noSuchKey")

    rt = run_cli("mqadmin", "clusterRT", "-a", "5", "-s", "16", "--json", "-n", ns.addr).ok().json()
    assert [(r["brokerName"], r["successCount"], r["failCount"]) for r in rt] == [("broker-a", 5, 0)]
    assert rt[0]["rtMs"] > 0
    run_cli("mqadmin", "clusterRT", "-a", "0", "-n", ns.addr).failed_with_one_line("-a")


async def test_kv_config_commands(cluster: tuple[Daemon, Daemon]) -> None:
    ns, _ = cluster
    (await run_cli_async("mqadmin", "updateKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "KvTopic", "-v",
                         "broker-a:4", "-n", ns.addr)).ok()
    async with Admin(ns.addr) as admin:
        assert await admin.get_kv_config("ORDER_TOPIC_CONFIG", "KvTopic") == "broker-a:4"
        (await run_cli_async("mqadmin", "deleteKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "KvTopic",
                             "-n", ns.addr)).ok()
        assert await admin.get_kv_config("ORDER_TOPIC_CONFIG", "KvTopic") is None
    (await run_cli_async("mqadmin", "deleteKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "KvTopic", "-n", ns.addr)
     ).failed_with_one_line("KvTopic")
    (await run_cli_async("mqadmin", "updateKvConfig", "-s", "S", "-k", "k", "-n", ns.addr)
     ).failed_with_one_line("-v")


def test_wipe_write_perm(daemons: DaemonSet, refused_addr: str) -> None:
    """Own daemons: a broker without write permission would fail every other test's sends."""
    ns = daemons.namesrv()
    daemons.broker(ns.addr, name="broker-w")
    run_cli("mqadmin", "updateTopic", "-t", "WipeTopic", "-c", "DefaultCluster", "-n", ns.addr).ok()
    result = run_cli("mqadmin", "wipeWritePerm", "-b", "broker-w", "--json", "-n", ns.addr).ok().json()
    assert result[ns.addr] >= 1
    route = run_cli("mqadmin", "topicRoute", "-t", "WipeTopic", "--json", "-n", ns.addr).ok().json()
    assert route["queueDatas"][0]["perm"] == 4  # read only
    run_cli("mqadmin", "wipeWritePerm", "-n", ns.addr).failed_with_one_line("-b")
    run_cli("mqadmin", "wipeWritePerm", "-b", "broker-w", "-n", refused_addr).failed_with_one_line("wipeWritePerm")


# -- subscription groups, consumers and producers -----------------------------------------------

async def test_subscription_group_commands(cluster: tuple[Daemon, Daemon]) -> None:
    ns, broker = cluster
    (await run_cli_async("mqadmin", "updateSubGroup", "-g", "SubG", "-b", broker.addr, "-r", "3", "-s", "false",
                         "-n", ns.addr)).ok()
    async with Admin(ns.addr) as admin:
        groups = await admin.get_all_subscription_groups(broker.addr)
        assert groups["SubG"].retryMaxTimes == 3 and groups["SubG"].consumeEnable is False
        (await run_cli_async("mqadmin", "deleteSubGroup", "-g", "SubG", "-c", "DefaultCluster", "-n", ns.addr)).ok()
        assert "SubG" not in await admin.get_all_subscription_groups(broker.addr)
    (await run_cli_async("mqadmin", "deleteSubGroup", "-g", "SubG", "-b", broker.addr, "-n", ns.addr)
     ).failed_with_one_line("SubG")
    (await run_cli_async("mqadmin", "updateSubGroup", "-g", "G", "-b", broker.addr, "-s", "maybe", "-n", ns.addr)
     ).failed_with_one_line("-s")
    (await run_cli_async("mqadmin", "updateSubGroup", "-g", "G", "-n", ns.addr)).failed_with_one_line("-b", "-c")


async def test_connections_and_progress(cluster: tuple[Daemon, Daemon]) -> None:
    ns, _ = cluster
    (await run_cli_async("mqadmin", "updateTopic", "-t", "ConnTopic", "-c", "DefaultCluster", "-r", "2", "-w", "2",
                         "-n", ns.addr)).ok()
    async with Producer("ConnProducer", ns.addr) as producer:
        for i in range(6):
            await producer.send(Message("ConnTopic", f"m{i}".encode()))
        # Brokers learn of producers from heartbeats (every 30 s); send this one's now, as the
        # client does on its next tick, instead of waiting for it.
        assert producer._instance is not None
        await producer._instance.send_heartbeat_to_all_brokers()
        conns = (await run_cli_async("mqadmin", "producerConnection", "-g", "ConnProducer", "-t", "ConnTopic",
                                     "--json", "-n", ns.addr)).ok().json()
        assert [c["language"] for c in conns["connectionSet"]] == ["PYTHON"]
    (await run_cli_async("mqadmin", "producerConnection", "-g", "NoProducer", "-t", "ConnTopic", "-n", ns.addr)
     ).failed_with_one_line("NoProducer")

    consumer = LitePullConsumer("ConnGroup", ns.addr, auto_commit=False,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe("ConnTopic", "*")
    async with consumer:
        got = await poll_count(consumer, 6, 20)
        assert got == 6
        await consumer.commit()
        info = (await run_cli_async("mqadmin", "consumerConnection", "-g", "ConnGroup", "--json", "-n", ns.addr)
                ).ok().json()
        assert len(info["connectionSet"]) == 1 and "ConnTopic" in info["subscriptionTable"]
        table = (await run_cli_async("mqadmin", "consumerConnection", "-g", "ConnGroup", "-n", ns.addr)).ok().stdout
        assert "ConnTopic" in table and "CLUSTERING" in table
        progress = (await run_cli_async("mqadmin", "consumerProgress", "-g", "ConnGroup", "-s", "--json",
                                        "-n", ns.addr)).ok().json()
        assert progress["diffTotal"] == 0
        assert sum(q["consumerOffset"] for q in progress["queues"]) == 6
        assert len(progress["clients"]) == 1
    groups = (await run_cli_async("mqadmin", "consumerProgress", "--json", "-n", ns.addr)).ok().json()
    assert {"group": "ConnGroup", "count": 0, "diffTotal": 0} in groups
    (await run_cli_async("mqadmin", "consumerConnection", "-g", "ConnGroup", "-n", ns.addr)
     ).failed_with_one_line("ConnGroup")
    (await run_cli_async("mqadmin", "consumerProgress", "-g", "NoGroup", "-n", ns.addr)
     ).failed_with_one_line("NoGroup")


def test_reset_offset_by_time(cluster: tuple[Daemon, Daemon]) -> None:
    ns, _ = cluster
    topic_with_messages(ns, "ResetTopic", 4, queues=1)
    run_cli("mqadmin", "consumeMessage", "-t", "ResetTopic", "-g", "ResetGroup", "-n", ns.addr).ok()
    before = run_cli("mqadmin", "consumerProgress", "-g", "ResetGroup", "--json", "-n", ns.addr).ok().json()
    assert [q["consumerOffset"] for q in before["queues"]] == [4]
    listed = run_cli("mqadmin", "topicList", "-c", "--json", "-n", ns.addr).ok().json()
    assert {"topic": "ResetTopic", "cluster": "DefaultCluster", "consumerGroup": "ResetGroup"} in listed
    assert not any(r["topic"].startswith("%RETRY%") for r in listed)
    reset = run_cli("mqadmin", "resetOffsetByTime", "-g", "ResetGroup", "-t", "ResetTopic", "-s", "0", "--json",
                    "-n", ns.addr).ok().json()
    assert [q["offset"] for q in reset["queues"]] == [0]
    after = run_cli("mqadmin", "consumerProgress", "-g", "ResetGroup", "--json", "-n", ns.addr).ok().json()
    assert after["diffTotal"] == 4
    now = run_cli("mqadmin", "resetOffsetByTime", "-g", "ResetGroup", "-t", "ResetTopic", "-s", "now", "-n", ns.addr)
    assert "rollback consumer offset" in now.ok().stdout
    run_cli("mqadmin", "resetOffsetByTime", "-g", "G", "-t", "ResetTopic", "-s", "yesterday", "-n", ns.addr
            ).failed_with_one_line("yesterday")
    run_cli("mqadmin", "resetOffsetByTime", "-g", "G", "-t", "NoSuchTopic", "-s", "now", "-n", ns.addr
            ).failed_with_one_line("NoSuchTopic")


# -- messages -----------------------------------------------------------------------------------

def test_message_commands(cluster: tuple[Daemon, Daemon]) -> None:
    ns, _ = cluster
    sent = topic_with_messages(ns, "MsgTopic", 3)
    assert all(s["sendStatus"] == "SEND_OK" for s in sent)

    by_id = run_cli("mqadmin", "queryMsgById", "-i", str(sent[1]["offsetMsgId"]), "--json", "-n", ns.addr).ok().json()
    assert by_id["body"] == "body-1" and by_id["keys"] == "MsgTopic-key-1"
    assert by_id["tracks"] == [], "no group consumes MsgTopic yet"
    by_uniq = run_cli("mqadmin", "queryMsgById", "-i", str(sent[2]["msgId"]), "-t", "MsgTopic", "-n", ns.addr).ok()
    assert "body-2" in by_uniq.stdout and "MsgTopic-key-2" in by_uniq.stdout
    assert "WARN: No Consumer" in by_uniq.stdout
    run_cli("mqadmin", "consumeMessage", "-t", "MsgTopic", "-g", "MsgGroup", "-n", ns.addr).ok()
    by_id = run_cli("mqadmin", "queryMsgById", "-i", str(sent[1]["offsetMsgId"]), "--json", "-n", ns.addr).ok().json()
    (track,) = by_id["tracks"]
    assert (track["consumerGroup"], track["trackType"]) == ("MsgGroup", "NOT_ONLINE"), track
    assert track["exceptionDesc"].startswith("CODE:206 ")
    run_cli("mqadmin", "queryMsgById", "-i", "nothex", "-n", ns.addr).failed_with_one_line("nothex")

    by_key = run_cli("mqadmin", "queryMsgByKey", "-t", "MsgTopic", "-k", "MsgTopic-key-0", "--json", "-n", ns.addr)
    assert [m["msgId"] for m in by_key.ok().json()] == [sent[0]["msgId"]]
    run_cli("mqadmin", "queryMsgByKey", "-t", "MsgTopic", "-k", "nokey", "-n", ns.addr).failed_with_one_line("nokey")

    first = sent[0]
    by_offset = run_cli("mqadmin", "queryMsgByOffset", "-t", "MsgTopic", "-b", str(first["brokerName"]),
                        "-i", str(first["queueId"]), "-o", str(first["queueOffset"]), "-n", ns.addr).ok()
    assert "body-0" in by_offset.stdout and "Queue Offset:" in by_offset.stdout
    assert "MessageTrack [consumerGroup=MsgGroup, trackType=NOT_ONLINE, exceptionDesc=CODE:206 " in by_offset.stdout
    run_cli("mqadmin", "queryMsgByOffset", "-t", "MsgTopic", "-b", str(first["brokerName"]), "-i",
            str(first["queueId"]), "-o", "999", "-n", ns.addr).failed_with_one_line("999")

    printed = run_cli("mqadmin", "printMsg", "-t", "MsgTopic", "--json", "-n", ns.addr).ok().json()
    assert sorted(m["body"] for m in printed) == ["body-0", "body-1", "body-2"]
    assert run_cli("mqadmin", "printMsg", "-t", "MsgTopic", "-s", "TagB", "--json", "-n", ns.addr).ok().json() == []
    run_cli("mqadmin", "printMsg", "-t", "NoSuchTopic", "-n", ns.addr).failed_with_one_line("NoSuchTopic")

    consumed = run_cli("mqadmin", "consumeMessage", "-t", "MsgTopic", "-c", "2", "--json", "-n", ns.addr).ok().json()
    assert len(consumed) == 2
    one = run_cli("mqadmin", "consumeMessage", "-t", "MsgTopic", "-b", str(first["brokerName"]), "-i",
                  str(first["queueId"]), "-o", str(first["queueOffset"]), "-c", "1", "--json", "-n", ns.addr)
    assert [m["body"] for m in one.ok().json()] == ["body-0"]
    run_cli("mqadmin", "consumeMessage", "-t", "NoSuchTopic", "-n", ns.addr).failed_with_one_line("NoSuchTopic")
    run_cli("mqadmin", "consumeMessage", "-t", "MsgTopic", "-o", "1", "-n", ns.addr).failed_with_one_line("-o")

    run_cli("mqadmin", "sendMessage", "-t", "MsgTopic", "-p", "x", "-i", "0", "-n", ns.addr).failed_with_one_line("-b")
    run_cli("mqadmin", "sendMessage", "-t", "MsgTopic", "-p", "x", "-b", "broker-zz", "-n", ns.addr
            ).failed_with_one_line("broker-zz")


def test_namesrv_addr_from_environment(cluster: tuple[Daemon, Daemon]) -> None:
    ns, broker = cluster
    result = run_cli("mqadmin", "clusterList", "--json", env={"NAMESRV_ADDR": ns.addr}).ok()
    assert [r["addr"] for r in result.json()] == [broker.addr]
    assert os.environ.get("NAMESRV_ADDR") != ns.addr  # the helper passed it to the child only
