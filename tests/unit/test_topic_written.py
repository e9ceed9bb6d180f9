"""A message stored in a topic created for it is answered only once the topic table holding that
topic is on disk (TopicConfigManager.written): a broker killed right after the answer would
otherwise restart without the topic, the message in its log but hidden from every consumer."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator

import pytest

from rocketmq_py.broker.processors.send import SendMessageProcessor
from rocketmq_py.broker.topic_config_manager import TopicConfigManager
from rocketmq_py.remoting.codes import RequestCode, ResponseCode
from rocketmq_py.remoting.command import RemotingCommand
from tests.unit.send_helpers import send_processor, unconnected


def _send(topic: str, queue_id: int = 0) -> RemotingCommand:
    # As the SDK sends it (tests/unit/test_send_plain.py's SDK_FIELDS), to ``topic``.
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {
        "a": "pg", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0", "g": "1700000000123",
        "h": "3", "i": "TAGS\x01a\x02WAIT\x01true\x02UNIQ_KEY\x01U1", "j": "0", "k": "false", "m": "false",
        "n": "b"}, b"body")


def _on_disk(topics: TopicConfigManager) -> set[str]:
    path = topics.config_file_path()
    if not os.path.exists(path):
        return set()
    with open(path) as f:
        return set(json.load(f)["topicConfigTable"])


@pytest.fixture
async def held(tmp_path: str) -> AsyncIterator[tuple[SendMessageProcessor, asyncio.Event]]:
    """A processor whose topic table writes wait for the event."""
    async with send_processor(tmp_path) as processor:
        topics = processor.broker.topic_config_manager
        release = asyncio.Event()
        write = topics.persist_async

        async def held_write() -> None:
            await release.wait()
            await write()

        topics.persist_async = held_write  # type: ignore[method-assign]
        yield processor, release
        release.set()
        await topics.persisted()


async def _answer(result: object) -> RemotingCommand:
    if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
        result = await asyncio.wait_for(result, 10)
    assert isinstance(result, RemotingCommand)
    return result


async def test_sends_to_a_topic_created_for_them_are_answered_once_it_is_written(
        held: tuple[SendMessageProcessor, asyncio.Event]) -> None:
    processor, release = held
    topics = processor.broker.topic_config_manager
    first = processor.process_request(unconnected(), _send("Auto"))  # creates Auto
    # The fast path (a run of plain sends) leaves a topic still being written to the full path.
    assert processor.process_requests(unconnected(), [_send("Auto", 1)]) == []
    second = processor.process_request(unconnected(), _send("Auto", 1))
    pending = [asyncio.ensure_future(_answer(r)) for r in (first, second)]
    await asyncio.sleep(0.05)  # the answers' tasks run; the write is held, so neither may finish
    assert not any(p.done() for p in pending)
    assert "Auto" in topics.unwritten and "Auto" not in _on_disk(topics)
    release.set()
    for answer in await asyncio.wait_for(asyncio.gather(*pending), 10):
        assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert "Auto" in _on_disk(topics)
    assert topics.unwritten == {}
    # Written: the next send is answered at once, by the fast path.
    [third] = processor.process_requests(unconnected(), [_send("Auto")])
    assert isinstance(third, RemotingCommand) and third.code == ResponseCode.SUCCESS


async def test_sends_to_written_topics_are_answered_at_once_while_another_is_written(
        held: tuple[SendMessageProcessor, asyncio.Event]) -> None:
    processor, release = held
    assert (await _answer(processor.process_request(unconnected(), _send("T")))).code == ResponseCode.SUCCESS
    pending = asyncio.ensure_future(_answer(processor.process_request(unconnected(), _send("Auto"))))
    [answer] = processor.process_requests(unconnected(), [_send("T")])  # send_helpers' topic T, known
    assert isinstance(answer, RemotingCommand) and answer.code == ResponseCode.SUCCESS
    assert not pending.done()
    release.set()
    assert (await asyncio.wait_for(pending, 10)).code == ResponseCode.SUCCESS


async def test_a_failed_write_still_answers_the_stored_message(tmp_path: str) -> None:
    async with send_processor(tmp_path) as processor:
        topics = processor.broker.topic_config_manager

        async def failing_write() -> None:
            raise OSError(28, "No space left on device")

        topics.persist_async = failing_write  # type: ignore[method-assign]
        answer = await _answer(processor.process_request(unconnected(), _send("Auto")))
        assert answer.code == ResponseCode.SUCCESS  # stored; the write's failure is the log's
        assert topics.unwritten == {}
