"""Delayed messages: parking in SCHEDULE_TOPIC_XXXX and delivery when due (docs/store-formats.md#delay-levels).

A message with a delay level is stored in ``SCHEDULE_TOPIC_XXXX`` queue ``level - 1`` with its
real topic and queue in REAL_TOPIC / REAL_QID; the store writes its delivery time into the
consume-queue tag field. Each level's queue is in delivery order (one delay per queue), so
delivery only ever looks at a queue's head: when it is due, the message is re-stored on its real
topic and the level's offset moves on. Progress is ``config/delayOffset.json`` (Java's
ScheduleMessageService), persisted every ``flushDelayOffsetInterval`` and at shutdown: a clean
restart neither loses nor repeats a delivery; a crash repeats at most what was delivered since
the last persist (at-least-once, as in RocketMQ).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time

from rocketmq_py.broker.config_manager import ConfigManager
from rocketmq_py.broker.topic_config_manager import TRANS_HALF_TOPIC
from rocketmq_py.remoting.header import parse_int, shown
from rocketmq_py.remoting.protocol import json_body
from rocketmq_py.remoting.protocol.message import MessageConst, RecordError, decode_record, properties_to_string
from rocketmq_py.store.commit_log import MessageExtBrokerInner, inner_from_ext
from rocketmq_py.store.config import SCHEDULE_TOPIC
from rocketmq_py.store.message_store import DefaultMessageStore

log = logging.getLogger("rocketmq.broker")

# Java re-runs a level's task after 100 ms whenever its head is not due or a put failed; the
# first run is 1 s after start.
DELAY_FOR_A_WHILE = 0.1
FIRST_DELAY_TIME = 1.0


class DelayLevelError(ValueError):
    """A DELAY property Java's Integer.parseInt refuses."""


class ScheduleMessageService(ConfigManager):
    def __init__(self, store: DefaultMessageStore) -> None:
        self.store = store
        self.delay_level_table = store.delay_level_table
        self.max_delay_level = max(self.delay_level_table)
        self._path = os.path.join(store.config.storePathRootDir, "config", "delayOffset.json")
        # Level -> the next SCHEDULE_TOPIC_XXXX queue offset to deliver.
        self.offset_table: dict[int, int] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.delivered = 0

    # -- delayOffset.json -------------------------------------------------------------------

    def config_file_path(self) -> str:
        return self._path

    def encode(self) -> str:
        return json.dumps({"offsetTable": {str(k): v for k, v in sorted(self.offset_table.items())}}, indent=4)

    def decode(self, text: str) -> None:
        try:
            raw = json_body.loads(text)  # Java writes the level keys unquoted
            table = {int(level): int(offset) for level, offset in raw.get("offsetTable", {}).items()}
        except (AttributeError, TypeError, ValueError) as exc:
            raise ValueError(f"bad delay offset table: {exc}") from None
        self.offset_table = table

    # -- parking (on put) -------------------------------------------------------------------

    def delay_level_of(self, props: dict[str, str]) -> int:
        """The message's delay level clamped to the highest (as Java's CommitLog), 0 for none."""
        raw = props.get(MessageConst.DELAY_TIME_LEVEL)
        if raw is None:
            return 0
        try:
            level = parse_int(raw)  # as Java's Message.getDelayTimeLevel: beyond int32 is refused
        except ValueError:
            raise DelayLevelError(f"the delay level (property DELAY) {shown(raw)} is not an int") from None
        return min(level, self.max_delay_level) if level > 0 else 0

    def park(self, props: dict[str, str], topic: str, queue_id: int, level: int) -> tuple[str, int]:
        """Re-address a delayed message to its level's schedule queue, remembering where it goes."""
        props[MessageConst.DELAY_TIME_LEVEL] = str(level)
        props[MessageConst.REAL_TOPIC] = topic
        props[MessageConst.REAL_QUEUE_ID] = str(queue_id)
        return SCHEDULE_TOPIC, level - 1

    def park_committed(self, inner: MessageExtBrokerInner, props: dict[str, str]) -> None:
        """A committed transactional message with a delay level waits like a plain one (Java's
        CommitLog parks COMMIT_TYPE puts too); an unreadable level is no delay here, since the
        half message was accepted long ago."""
        try:
            level = self.delay_level_of(props)
        except DelayLevelError:
            return
        if level:
            inner.topic, inner.queue_id = self.park(props, inner.topic, inner.queue_id, level)
            inner.properties_string = properties_to_string(props)

    # -- delivery ---------------------------------------------------------------------------

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._deliver_loop()), loop.create_task(self._persist_loop())]

    async def shutdown(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        self.persist()

    async def _deliver_loop(self) -> None:
        await asyncio.sleep(FIRST_DELAY_TIME)
        while True:
            try:
                wait = await self.deliver_due()
            except Exception:
                log.exception("delayed message delivery failed; retrying")
                wait = DELAY_FOR_A_WHILE
            await asyncio.sleep(wait)

    async def _persist_loop(self) -> None:
        while True:
            await asyncio.sleep(self.store.config.flushDelayOffsetInterval / 1000)
            try:
                await self.persist_async()
            except OSError as exc:
                log.error("persist delay offsets failed: %s", exc)

    async def deliver_due(self) -> float:
        """Deliver every due head of every level; the seconds until the next look."""
        wait = DELAY_FOR_A_WHILE
        queues = self.store.consume_queue_table.get(SCHEDULE_TOPIC, {})
        for queue_id, cq in list(queues.items()):
            level = queue_id + 1
            delay = self.delay_level_table.get(level)
            if delay is None:
                continue
            offset = max(self.offset_table.get(level, 0), cq.min_offset_in_queue)
            while True:
                unit = cq.unit_at(offset)
                if unit is None:
                    break
                phy, size, deliver_at = unit
                now = int(time.time() * 1000)
                # A delivery time further ahead than the level's delay (the clock went back, or
                # the level table changed) is treated as due now.
                if deliver_at - now > delay:
                    deliver_at = now
                if deliver_at > now:
                    wait = min(wait, (deliver_at - now) / 1000)
                    break
                if not await self._deliver(phy, size, level):
                    break
                offset += 1
                self.offset_table[level] = offset
        return wait

    async def _deliver(self, phy: int, size: int, level: int) -> bool:
        """Re-store one parked message on its real topic; False to try it again later."""
        data = self.store.look_message_by_offset(phy, size)
        try:
            msg = decode_record(data) if data is not None else None
        except RecordError as exc:
            msg = None
            log.error("delayed message at %d is unreadable (%s); skipped", phy, exc)
        if msg is None:
            log.warning("delayed message at %d of level %d is gone; skipped", phy, level)
            return True
        real_topic = msg.properties.get(MessageConst.REAL_TOPIC)
        real_qid = msg.properties.get(MessageConst.REAL_QUEUE_ID, "")
        if not real_topic or not real_qid.lstrip("-").isdigit() or real_topic == TRANS_HALF_TOPIC:
            log.error("delayed message %s has no deliverable real topic/queue (%s/%s); discarded",
                      msg.offset_msg_id, real_topic, real_qid)
            return True
        # The properties string stays as stored, still naming REAL_TOPIC/REAL_QID/DELAY (as Java's).
        inner = inner_from_ext(msg)
        inner.topic, inner.queue_id = real_topic, int(real_qid)
        result = await self.store.put_message(inner)
        if not result.ok:
            log.error("delivering delayed message %s to %s failed: %s; retrying", msg.msg_id, real_topic,
                      result.status.value)
            return False
        self.delivered += 1
        return True
