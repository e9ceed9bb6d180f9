"""A SendMessageProcessor on a real store, without a broker or sockets (tests/unit/test_send_plain.py,
tests/unit/test_send_batch.py)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from rocketmq_py.broker.config import BrokerConfig
from rocketmq_py.broker.processors.send import SendMessageProcessor
from rocketmq_py.broker.stats import BrokerStats
from rocketmq_py.broker.topic_config_manager import TopicConfigManager
from rocketmq_py.remoting.connection import RemotingConnection
from rocketmq_py.remoting.processor import ProcessorTable
from rocketmq_py.remoting.protocol.topic import TopicConfig
from rocketmq_py.store.message_store import DefaultMessageStore
from tests.store_helpers import STORE_HOST, small_config


@dataclass
class _Broker:
    """What SendMessageProcessor reads of its BrokerController."""

    broker_config: BrokerConfig
    topic_config_manager: TopicConfigManager
    message_store: DefaultMessageStore
    store_host: tuple[str, int] = STORE_HOST
    stats: Any = None


def unconnected() -> RemotingConnection:
    """A real connection, never connected: compiled (the mypyc build), send_plain takes nothing else."""
    conn = RemotingConnection(ProcessorTable())
    conn.remote_addr = "10.0.0.7:5555"
    return conn


@contextlib.asynccontextmanager
async def send_processor(tmp_path: Any, **store_config: object) -> AsyncIterator[SendMessageProcessor]:
    """A processor of cluster C1 whose store holds topic T (4 queues)."""
    store = DefaultMessageStore(small_config(str(tmp_path), messageIndexInChildProcess=False, **store_config))
    await store.load()
    await store.start()
    topics = TopicConfigManager(str(tmp_path))
    topics.update_topic_config(TopicConfig(topicName="T", readQueueNums=4, writeQueueNums=4))
    try:
        yield SendMessageProcessor(_Broker(BrokerConfig(brokerClusterName="C1"), topics, store,  # type: ignore[arg-type]
                                           stats=BrokerStats()))
    finally:
        await store.shutdown()
