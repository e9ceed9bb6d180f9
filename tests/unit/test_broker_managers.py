"""Broker tables: persistence with backup fallback, offsets, groups, members, queue locks."""

from __future__ import annotations

import json
import logging
import os

import pytest

from rocketmq_py.broker.client_channel import ClientChannelInfo
from rocketmq_py.broker.consumer_manager import ConsumerManager
from rocketmq_py.broker.consumer_offset_manager import ConsumerOffsetManager
from rocketmq_py.broker.producer_manager import ProducerManager
from rocketmq_py.broker.rebalance_lock_manager import RebalanceLockManager
from rocketmq_py.broker.subscription_group_manager import SubscriptionGroupManager
from rocketmq_py.remoting.connection import RemotingConnection
from rocketmq_py.remoting.processor import ProcessorTable
from rocketmq_py.remoting.protocol.heartbeat import ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData

CLUSTERING, PUSH = MessageModel.CLUSTERING, ConsumeType.CONSUME_PASSIVELY
LAST = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET


def test_offsets_persist_and_reload(tmp_path: str) -> None:
    m = ConsumerOffsetManager(str(tmp_path))
    m.commit_offset("g1", "T", 0, 17)
    m.commit_offset("g1", "T", 3, 5)
    m.commit_offset("g2", "T", 0, 1)
    m.persist()
    again = ConsumerOffsetManager(str(tmp_path))
    assert again.load()
    assert again.query_offset("g1", "T", 0) == 17 and again.query_offset("g1", "T", 3) == 5
    assert again.query_offset("g1", "T", 1) == -1 and again.query_offset("nobody", "T", 0) == -1
    assert again.which_group_by_topic("T") == {"g1", "g2"}
    assert again.which_topic_by_consumer("g2") == {"T"}


def test_offsets_read_fastjson_unquoted_keys(tmp_path: str) -> None:
    path = os.path.join(str(tmp_path), "config", "consumerOffset.json")
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as f:
        f.write('{\n\t"offsetTable":{\n\t\t"TopicTest@cg1":{0:17,1:18}\n\t}\n}')
    m = ConsumerOffsetManager(str(tmp_path))
    assert m.load()
    assert m.query_offsets("cg1", "TopicTest") == {0: 17, 1: 18}


def test_corrupt_file_falls_back_to_backup_with_warning(tmp_path: str, caplog: pytest.LogCaptureFixture) -> None:
    m = ConsumerOffsetManager(str(tmp_path))
    m.commit_offset("g", "T", 0, 1)
    m.persist()
    m.commit_offset("g", "T", 0, 2)
    m.persist()  # the .bak now holds offset 1, the file offset 2
    with open(m.config_file_path(), "w") as f:
        f.write('{"offsetTable": {"T@g": {0: 2')  # torn write
    again = ConsumerOffsetManager(str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="rocketmq.broker"):
        assert again.load()
    assert again.query_offset("g", "T", 0) == 1
    assert any("backup" in r.message for r in caplog.records)


def test_missing_files_load_empty(tmp_path: str) -> None:
    m = ConsumerOffsetManager(str(tmp_path))
    assert m.load() and m.offset_table == {}


def test_subscription_groups_defaults_auto_create_and_persist(tmp_path: str) -> None:
    m = SubscriptionGroupManager(str(tmp_path))
    assert m.find_subscription_group_config("TOOLS_CONSUMER") is not None
    created = m.find_subscription_group_config("my_group")
    assert created is not None and created.retryMaxTimes == 16 and created.retryQueueNums == 1
    version = m.data_version.counter
    assert version >= 1
    again = SubscriptionGroupManager(str(tmp_path))
    assert again.load() and "my_group" in again.table and again.data_version.counter == version
    with open(m.config_file_path()) as f:
        on_disk = json.load(f)
    assert on_disk["subscriptionGroupTable"]["my_group"]["consumeEnable"] is True


def test_subscription_group_auto_create_off(tmp_path: str) -> None:
    m = SubscriptionGroupManager(str(tmp_path), auto_create_subscription_group=False)
    assert m.find_subscription_group_config("my_group") is None
    assert m.find_subscription_group_config("CID_RMQ_SYS_TRANS") is not None, "system groups are always created"
    assert m.delete_subscription_group_config("CID_RMQ_SYS_TRANS")
    assert not m.delete_subscription_group_config("CID_RMQ_SYS_TRANS")


def _conn() -> RemotingConnection:
    return RemotingConnection(ProcessorTable())


def _sub(topic: str, version: int = 1) -> SubscriptionData:
    return SubscriptionData(topic=topic, subVersion=version)


async def test_membership_changes_notify_remaining_members() -> None:
    notified: list[tuple[str, list[RemotingConnection]]] = []
    m = ConsumerManager(lambda g, chans: notified.append((g, chans)))
    a, b = _conn(), _conn()
    assert m.register_consumer("cg", ClientChannelInfo(a, "A", 3, 409), PUSH, CLUSTERING, LAST, [_sub("T")], True)
    assert m.register_consumer("cg", ClientChannelInfo(b, "B", 3, 409), PUSH, CLUSTERING, LAST, [_sub("T")], True)
    assert notified[-1] == ("cg", [a, b])
    # A repeated heartbeat with the same subscriptions changes nothing and notifies nobody.
    count = len(notified)
    assert not m.register_consumer("cg", ClientChannelInfo(a, "A", 3, 409), PUSH, CLUSTERING, LAST, [_sub("T", 2)],
                                   True)
    assert len(notified) == count
    m.do_channel_close_event(a)
    assert notified[-1] == ("cg", [b])
    assert m.get_consumer_group_info("cg").all_client_ids() == ["B"]  # type: ignore[union-attr]
    m.unregister_consumer("cg", b, True)
    assert m.get_consumer_group_info("cg") is None, "a group with no member is removed"


async def test_subscription_change_notifies_and_expiry_scan_removes() -> None:
    notified: list[str] = []
    m = ConsumerManager(lambda g, chans: notified.append(g), channel_expired_timeout=120)
    a = _conn()
    m.register_consumer("cg", ClientChannelInfo(a, "A", 3, 409), PUSH, CLUSTERING, LAST, [_sub("T")], True)
    m.register_consumer("cg", ClientChannelInfo(a, "A", 3, 409), PUSH, CLUSTERING, LAST, [_sub("T"), _sub("U")],
                        True)
    assert notified == ["cg", "cg"]
    assert m.query_topic_consume_by_who("U") == {"cg"}
    info = m.get_consumer_group_info("cg")
    assert info is not None
    assert m.scan_not_active_channel(now=info.channel_info_table[a].last_update + 100) == []
    assert m.scan_not_active_channel(now=info.channel_info_table[a].last_update + 121) == [a]
    assert m.get_consumer_group_info("cg") is None


async def test_producer_groups() -> None:
    m = ProducerManager()
    a, b = _conn(), _conn()
    m.register_producer("pg", ClientChannelInfo(a, "A", 3, 409))
    m.register_producer("pg", ClientChannelInfo(b, "B", 3, 409))
    assert m.find_channel("B") is b
    assert m.get_available_channel("pg") is None, "unconnected channels are not available"
    m.do_channel_close_event(a)
    assert list(m.group_channel_table["pg"]) == [b]
    last = m.group_channel_table["pg"][b].last_update
    assert m.scan_not_active_channel(now=last + 121) == [b]
    assert "pg" not in m.group_channel_table


def test_queue_lock_held_until_released_or_expired() -> None:
    m = RebalanceLockManager(lock_max_live_time=60)
    q0, q1 = ("T", "broker-a", 0), ("T", "broker-a", 1)
    assert m.try_lock_batch("g", [q0], "A", now=0) == {q0}
    assert m.try_lock_batch("g", [q0, q1], "B", now=10) == {q1}, "B must not get A's queue"
    assert m.try_lock_batch("g", [q0], "A", now=50) == {q0}, "A renews"
    assert m.try_lock_batch("g", [q0], "B", now=100) == set(), "renewed at 50, alive until 110"
    assert m.try_lock_batch("g", [q0], "B", now=111) == {q0}, "expired: B takes it"
    m.unlock_batch("g", [q0], "A")  # not A's any more: no effect
    assert m.is_locked("g", q0, "B", now=112)
    m.unlock_batch("g", [q0], "B")
    assert m.try_lock_batch("g", [q0], "A", now=113) == {q0}
