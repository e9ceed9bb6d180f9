"""Topic table: system topics, auto-creation from TBW102, retry topics, persistence."""

from __future__ import annotations

import asyncio
import errno

import pytest

from rocketmq_py.broker import config_manager
from rocketmq_py.broker.topic_config_manager import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    TopicConfigManager,
    validate_topic,
)
from rocketmq_py.remoting.protocol.topic import PermName, TopicConfig, retry_topic
from rocketmq_py.store.config import SCHEDULE_TOPIC


def test_system_topics_exist_at_start(tmp_path: str) -> None:
    m = TopicConfigManager(str(tmp_path), broker_cluster_name="C1", broker_name="b1")
    tbw = m.select_topic_config(AUTO_CREATE_TOPIC_KEY_TOPIC)
    assert tbw is not None and tbw.perm == 7 and tbw.writeQueueNums == 8
    assert m.select_topic_config(SCHEDULE_TOPIC).readQueueNums == 18  # type: ignore[union-attr]
    assert m.select_topic_config("C1").perm == 7  # type: ignore[union-attr]
    assert m.select_topic_config("C1_REPLY_TOPIC") is not None
    assert m.is_system_topic(SCHEDULE_TOPIC) and m.is_system_topic("rmq_sys_anything")
    assert not m.is_system_topic("TopicTest")


def test_auto_create_from_default_topic(tmp_path: str) -> None:
    changes: list[str] = []
    m = TopicConfigManager(str(tmp_path), on_change=lambda c: changes.append(c.topicName))
    created = m.create_topic_in_send_message_method("NewTopic", AUTO_CREATE_TOPIC_KEY_TOPIC, 4)
    assert created is not None
    assert (created.readQueueNums, created.writeQueueNums, created.perm) == (4, 4, 6)
    assert changes == ["NewTopic"]
    assert m.create_topic_in_send_message_method("NewTopic", AUTO_CREATE_TOPIC_KEY_TOPIC, 4) is created
    assert changes == ["NewTopic"], "an existing topic is not re-created"
    capped = m.create_topic_in_send_message_method("Wide", AUTO_CREATE_TOPIC_KEY_TOPIC, 64)
    assert capped is not None and capped.writeQueueNums == 8, "capped at the template's queues"


def test_auto_create_off_refuses(tmp_path: str) -> None:
    m = TopicConfigManager(str(tmp_path), auto_create_topic_enable=False)
    assert m.select_topic_config(AUTO_CREATE_TOPIC_KEY_TOPIC) is None
    assert m.create_topic_in_send_message_method("NewTopic", AUTO_CREATE_TOPIC_KEY_TOPIC, 4) is None
    # A TBW102 created by hand without INHERIT does not allow auto-creation either.
    m.update_topic_config(TopicConfig(topicName=AUTO_CREATE_TOPIC_KEY_TOPIC, perm=6))
    assert m.create_topic_in_send_message_method("NewTopic", AUTO_CREATE_TOPIC_KEY_TOPIC, 4) is None


def test_retry_topic_and_persistence(tmp_path: str) -> None:
    m = TopicConfigManager(str(tmp_path))
    m.create_topic_in_send_message_back_method(retry_topic("cg"), 1, PermName.PERM_READ | PermName.PERM_WRITE)
    m.update_topic_config(TopicConfig(topicName="Orders", readQueueNums=2, writeQueueNums=2, order=True))
    version = m.data_version.counter
    again = TopicConfigManager(str(tmp_path))
    assert again.load()
    assert again.select_topic_config("%RETRY%cg").readQueueNums == 1  # type: ignore[union-attr]
    assert again.is_order_topic("Orders") and again.data_version.counter == version
    assert again.delete_topic_config("Orders") and again.select_topic_config("Orders") is None


def test_validate_topic() -> None:
    assert validate_topic("TopicTest_1-%|x") is None
    assert "blank" in (validate_topic(" ") or "")
    assert "illegal characters" in (validate_topic("a b") or "")
    assert "longer" in (validate_topic("x" * 128) or "")


async def test_changes_in_flight_together_are_written_together(tmp_path: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Topics created while the table is being written are taken by its next write, not one
    write each; every waiter's future is done only once a file holding its topic is on disk, and
    a failed write fails the futures waiting for it, the next change writing everything again."""
    m = TopicConfigManager(str(tmp_path))
    writes: list[str] = []
    fail = [False]
    real = config_manager.write_file_atomically  # type: ignore[attr-defined]

    def counting(path: str, text: str) -> None:
        if fail[0]:
            raise OSError(errno.ENOSPC, "No space left on device")
        writes.append(text)
        real(path, text)

    monkeypatch.setattr(config_manager, "write_file_atomically", counting)

    async def create(name: str) -> None:
        m.update_topic_config(TopicConfig(topicName=name, readQueueNums=8, writeQueueNums=8))
        written = m.persist_soon()
        assert written is not None
        await written
        on_disk = TopicConfigManager(str(tmp_path))
        assert on_disk.load() and on_disk.select_topic_config(name) is not None, name

    await asyncio.gather(*(create(f"Many{i}") for i in range(200)))
    assert 1 <= len(writes) <= 20, f"{len(writes)} writes for 200 topics"
    fail[0] = True
    m.update_topic_config(TopicConfig(topicName="Lost", readQueueNums=1, writeQueueNums=1))
    failed = m.persist_soon()
    assert failed is not None
    with pytest.raises(OSError):
        await failed
    fail[0] = False
    await create("After")
    again = TopicConfigManager(str(tmp_path))
    assert again.load() and again.select_topic_config("Lost") is not None
    await m.persisted()
