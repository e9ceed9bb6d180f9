"""AsyncTraceDispatcher: trace contexts batched into messages of the trace topic, sent by a
producer of their own.

The traced client's hot path only appends a context to a bounded queue (1,024, as Java's; when
full the context is dropped and counted, never blocking a send or a consume). A worker wakes
every 100 ms, encodes what arrived, and sends the batch once the oldest record has waited
500 ms or the batch nears the trace producer's 128,000-byte message limit (Java's pollingTimeMil,
waitTimeThresholdMil, maxMsgSize - 10,000). Each trace message carries every traced message's id
and keys as its KEYS, so the broker's index finds it by either (queryMsgTraceById).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import ssl
import time

from rocketmq_py.acl.session_credentials import SessionCredentials
from rocketmq_py.client.errors import MQClientError
from rocketmq_py.client.message import Message
from rocketmq_py.client.producer import Producer
from rocketmq_py.client.trace.trace_constants import GROUP_NAME_PREFIX, RMQ_SYS_TRACE_TOPIC, TRACE_INSTANCE_NAME
from rocketmq_py.client.trace.trace_context import TraceContext
from rocketmq_py.client.trace.trace_data_encoder import TraceTransferBean, encode
from rocketmq_py.remoting.exceptions import RemotingError

log = logging.getLogger("rocketmq.client")

QUEUE_SIZE = 1024
POLLING_TIME = 0.1
WAIT_TIME_THRESHOLD = 0.5
MAX_MSG_SIZE = 128_000
TRACE_SEND_TIMEOUT = 5.0
_COUNTER = itertools.count(1)


class AsyncTraceDispatcher:
    """One traced producer's or consumer's trace writer; ``dispatcher_type`` is PRODUCER or
    CONSUMER (Java's Type), part of the trace producer's group name."""

    def __init__(self, group: str, dispatcher_type: str, trace_topic: str | None = None,
                 session_credentials: SessionCredentials | None = None,
                 use_tls: bool | ssl.SSLContext = False) -> None:
        self.trace_topic = trace_topic.strip() if trace_topic and trace_topic.strip() else RMQ_SYS_TRACE_TOPIC
        self.group = group
        self.producer_group = f"{GROUP_NAME_PREFIX}-{group}-{dispatcher_type}-{next(_COUNTER)}"
        self.session_credentials = session_credentials
        self.use_tls = use_tls  # the host's channel settings, as Java's trace producer shares them
        self.discard_count = 0
        self._queue: collections.deque[TraceContext] = collections.deque()
        self._batch: list[TraceTransferBean] = []
        self._batch_size = 0
        self._first_added = 0.0
        self._sending: set[asyncio.Task[None]] = set()
        self._worker: asyncio.Task[None] | None = None
        self.producer: Producer | None = None

    def append(self, ctx: TraceContext) -> bool:
        """Queue a context; False (and counted) when the queue is full, as Java's offer."""
        if len(self._queue) >= QUEUE_SIZE:
            self.discard_count += 1
            log.info("trace buffer full, %d contexts discarded so far", self.discard_count)
            return False
        self._queue.append(ctx)
        return True

    async def start(self, namesrv_addr: str | None) -> None:
        if self._worker is not None:
            return
        self.producer = Producer(
            self.producer_group, namesrv_addr, instance_name=f"{TRACE_INSTANCE_NAME}_{namesrv_addr}",
            send_msg_timeout=TRACE_SEND_TIMEOUT, max_message_size=MAX_MSG_SIZE,
            session_credentials=self.session_credentials, use_tls=self.use_tls)
        await self.producer.start()
        self._worker = asyncio.get_running_loop().create_task(self._run())

    async def shutdown(self) -> None:
        """Send what is queued, wait for the sends (bounded by the send timeout), stop."""
        worker, self._worker = self._worker, None
        if worker is None:
            return
        worker.cancel()
        await asyncio.gather(worker, return_exceptions=True)
        await self.flush()
        if self.producer is not None:
            await self.producer.shutdown()
            self.producer = None

    async def flush(self) -> None:
        """Everything appended so far sent (or failed and logged), within the send timeout."""
        self._drain()
        self._send_batch()
        if self._sending:
            await asyncio.wait(set(self._sending), timeout=TRACE_SEND_TIMEOUT)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(POLLING_TIME)  # Java's polling period, not a wait for a condition
            self._drain()
            if self._batch and time.monotonic() - self._first_added >= WAIT_TIME_THRESHOLD:
                self._send_batch()

    def _drain(self) -> None:
        while self._queue:
            ctx = self._queue.popleft()
            if not ctx.trace_beans:
                continue
            bean = encode(ctx)
            if not self._batch:
                self._first_added = time.monotonic()
            self._batch.append(bean)
            self._batch_size += len(bean.trans_data)
            if self._batch_size >= MAX_MSG_SIZE - 10_000:
                self._send_batch()

    def _send_batch(self) -> None:
        if not self._batch or self.producer is None:
            return
        batch, self._batch, self._batch_size = self._batch, [], 0
        task = asyncio.get_running_loop().create_task(self._send(batch))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send(self, batch: list[TraceTransferBean]) -> None:
        keys = list(dict.fromkeys(k for bean in batch for k in bean.trans_keys))
        data = "".join(bean.trans_data for bean in batch)
        producer = self.producer
        if producer is None:
            return
        try:
            await producer.send(Message(self.trace_topic, data.encode(), keys=keys or None))
        except (MQClientError, RemotingError, OSError) as exc:
            log.error("send trace data failed, the traceData is %s: %s", data, exc)
