"""Topics this broker serves, ``config/topics.json``.

Rules in docs/behaviours.md#topics, the file in docs/store-formats.md#config-files.

System topics are created at start as RocketMQ 4.9 does. A send to an unknown topic may create
it from the template topic ``TBW102`` when that template carries the INHERIT permission (it does
only while ``autoCreateTopicEnable`` is on); ``%RETRY%`` topics are created on demand by
heartbeats and send-backs. Every change bumps the data version and calls ``on_change`` so the
broker re-registers with its NameServers at once: clients poll routes only every 30 s.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
from collections.abc import Callable

from pydantic import ValidationError

from rocketmq_py.broker.config_manager import ConfigManager
from rocketmq_py.remoting.protocol.topic import (
    DataVersion,
    PermName,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from rocketmq_py.store.config import SCHEDULE_TOPIC

log = logging.getLogger("rocketmq.broker")

AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
BENCHMARK_TOPIC = "BenchmarkTest"
RMQ_SYS_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"

TOPIC_MAX_LENGTH = 127
_TOPIC_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")

RW = PermName.PERM_READ | PermName.PERM_WRITE
# A dead-letter topic takes writes (send-back, direct sends past max reconsume times) but is not
# consumed by default: admin tools find its messages by key or id, and an operator who wants to
# replay them grants READ with updateTopicPerm.
DLQ_PERM = PermName.PERM_WRITE
DLQ_NUMS_PER_GROUP = 1


def validate_topic(topic: str) -> str | None:
    """None when the name is legal, else the reason (answered as a remark)."""
    if not topic or not topic.strip():
        return "The specified topic is blank."
    if len(topic) > TOPIC_MAX_LENGTH:
        return f"The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}."
    if not _TOPIC_PATTERN.match(topic):
        return f"The specified topic[{topic}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    return None


class TopicConfigManager(ConfigManager):
    def __init__(self, store_path_root: str, *, broker_cluster_name: str = "DefaultCluster",
                 broker_name: str = "broker-a", auto_create_topic_enable: bool = True,
                 default_topic_queue_nums: int = 8, cluster_topic_enable: bool = True,
                 broker_topic_enable: bool = True, trace_topic_enable: bool = False,
                 msg_trace_topic_name: str = RMQ_SYS_TRACE_TOPIC,
                 on_change: Callable[[TopicConfig], None] | None = None) -> None:
        self._path = os.path.join(store_path_root, "config", "topics.json")
        self.data_version = DataVersion()
        self.table: dict[str, TopicConfig] = {}
        self.on_change = on_change
        self.system_topics: set[str] = set()
        # Topics a send, a send-back or a heartbeat created whose table write is still under way:
        # a message stored in one is answered only once the write is done (``written``).
        self.unwritten: dict[str, asyncio.Future[None]] = {}

        def system(name: str, queues: int, perm: int = RW) -> None:
            config = TopicConfig(topicName=name, readQueueNums=queues, writeQueueNums=queues, perm=perm)
            self.table[config.topicName] = config
            self.system_topics.add(name)

        system(SELF_TEST_TOPIC, 1)
        if auto_create_topic_enable:
            system(AUTO_CREATE_TOPIC_KEY_TOPIC, default_topic_queue_nums, RW | PermName.PERM_INHERIT)
        system(BENCHMARK_TOPIC, 1024)
        system(broker_cluster_name, 16, PermName.PERM_INHERIT | (RW if cluster_topic_enable else 0))
        system(broker_name, 1, PermName.PERM_INHERIT | (RW if broker_topic_enable else 0))
        system(OFFSET_MOVED_EVENT, 1)
        system(SCHEDULE_TOPIC, 18)
        if trace_topic_enable:
            system(msg_trace_topic_name, 1)
        system(f"{broker_cluster_name}_{REPLY_TOPIC_POSTFIX}", 1)

    # -- persistence ------------------------------------------------------------------------

    def config_file_path(self) -> str:
        return self._path

    def encode(self) -> str:
        return self.wrapper().model_dump_json(exclude_none=True, indent=4)

    def decode(self, text: str) -> None:
        try:
            wrapper = TopicConfigSerializeWrapper.decode(text)
        except ValidationError as exc:
            raise ValueError(str(exc)) from None
        # Keyed by the configs' interned names (TopicConfig.topicName), which the store's tables share.
        self.table.update((sys.intern(name), config) for name, config in wrapper.topicConfigTable.items())
        self.data_version.assign(wrapper.dataVersion)

    def wrapper(self) -> TopicConfigSerializeWrapper:
        return TopicConfigSerializeWrapper(dataVersion=self.data_version, topicConfigTable=self.table)

    # -- queries ----------------------------------------------------------------------------

    def select_topic_config(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def is_system_topic(self, topic: str) -> bool:
        return topic in self.system_topics or topic.lower().startswith(SYSTEM_TOPIC_PREFIX)

    def is_order_topic(self, topic: str) -> bool:
        config = self.table.get(topic)
        return bool(config and config.order)

    # -- changes ----------------------------------------------------------------------------

    def _changed(self, config: TopicConfig) -> asyncio.Future[None] | None:
        # Written by persist_soon's one writer; an admin request waits for that write
        # (AdminBrokerProcessor), a message stored in a topic created for it too (``written``).
        self.data_version.next_version()
        write = self.persist_soon()
        if self.on_change is not None:
            self.on_change(config)
        return write

    def _created(self, config: TopicConfig) -> None:
        """A topic created on a message's behalf, unwritten until its write is done.

        Java writes the table before the send that created the topic is answered. A message
        answered before then, and the broker killed, would be in the log under a topic the
        restarted broker does not know: there, but hidden from every consumer."""
        write = self._changed(config)
        if write is None:
            return
        topic = config.topicName
        self.unwritten[topic] = write

        def done(_: asyncio.Future[None]) -> None:
            if self.unwritten.get(topic) is write:
                del self.unwritten[topic]
        write.add_done_callback(done)

    async def written(self, *topics: str) -> None:
        """Until the tables' writes that hold ``topics`` are done (at once when none is under
        way); a write that failed was logged by its writer, and the message is answered as
        stored, which it is."""
        writes = [write for topic in topics if (write := self.unwritten.get(topic)) is not None]
        if writes:
            await asyncio.wait(writes)

    def update_topic_config(self, config: TopicConfig) -> None:
        old = self.table.get(config.topicName)
        self.table[config.topicName] = config
        log.info("%s topic config, %s", "update" if old else "create new", config)
        self._changed(config)

    def delete_topic_config(self, topic: str) -> bool:
        old = self.table.pop(topic, None)
        if old is None:
            log.warning("delete topic config failed, topic: %s not exists", topic)
            return False
        log.info("delete topic config OK, topic: %s", old)
        self._changed(old)
        return True

    def create_topic_in_send_message_method(self, topic: str, default_topic: str, client_queue_nums: int,
                                            topic_sys_flag: int = 0) -> TopicConfig | None:
        """Auto-create ``topic`` from its template, as a send to an unknown topic does.

        The new topic gets min(client's queue count, template's write queues) queues and the
        template's permission without INHERIT; None when the template is missing or does not
        allow inheriting (auto-creation off).
        """
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        template = self.table.get(default_topic)
        if template is None:
            log.warning("Create new topic failed, because the default topic[%s] not exist. producer:%s",
                        default_topic, topic)
            return None
        if default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC and not PermName.is_inherited(template.perm):
            log.warning("Create new topic failed, because the default topic[%s] has no perm [%s] producer:%s",
                        default_topic, PermName.to_string(template.perm), topic)
            return None
        queues = max(1, min(client_queue_nums, template.writeQueueNums))
        config = TopicConfig(topicName=topic, readQueueNums=queues, writeQueueNums=queues,
                             perm=template.perm & ~PermName.PERM_INHERIT, topicSysFlag=topic_sys_flag,
                             topicFilterType=template.topicFilterType)
        log.info("Create new topic by default topic:[%s] config:[%s] producer:[%s]", default_topic, config, topic)
        self.table[config.topicName] = config
        self._created(config)
        return config

    def create_topic_in_send_message_back_method(self, topic: str, queue_nums: int, perm: int,
                                                 topic_sys_flag: int = 0) -> TopicConfig:
        """Create a ``%RETRY%``/``%DLQ%`` topic if missing (heartbeat, send-back)."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        config = TopicConfig(topicName=topic, readQueueNums=queue_nums, writeQueueNums=queue_nums, perm=perm,
                             topicSysFlag=topic_sys_flag)
        log.info("create new topic %s", config)
        self.table[config.topicName] = config
        self._created(config)
        return config

    def update_order_topic_config(self, order_topics: dict[str, str]) -> None:
        """Mark topics listed in the NameServer's ORDER_TOPIC_CONFIG namespace as ordered."""
        changed = False
        for name, config in self.table.items():
            order = name in order_topics
            if config.order != order:
                config.order = order
                changed = True
        if changed:
            self.data_version.next_version()
            self.persist_soon()
