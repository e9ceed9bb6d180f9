"""A blocking facade over the async SDK, for scripts and notebooks with no event loop.

One event loop runs on a background thread for the whole process; each blocking call submits
its coroutine there and waits for the result, so producers and consumers keep their long
connections and background tasks (heartbeats, pulls) between calls.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from client.allocate import MessageQueue
from client.lite_pull_consumer import LitePullConsumer
from client.message import Message, SendResult
from client.producer import Producer
from remoting.loop import loop_factory
from remoting.protocol.message import MessageExt

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None:
            loop = loop_factory()()
            thread = threading.Thread(target=loop.run_forever, name="rocketmq-py-loop", daemon=True)
            thread.start()
            _loop = loop
            atexit.register(loop.call_soon_threadsafe, loop.stop)
        return _loop


def run_sync(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run ``coro`` on the SDK's background loop and wait for it (not from inside that loop)."""
    loop = _background_loop()
    return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)


async def _construct(cls: type[T], *args: Any, **kwargs: Any) -> T:
    # Built on the background loop, so anything they create there belongs to it.
    return cls(*args, **kwargs)


class BlockingProducer:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._producer: Producer = run_sync(_construct(Producer, *args, **kwargs))

    def start(self) -> BlockingProducer:
        run_sync(self._producer.start())
        return self

    def shutdown(self) -> None:
        run_sync(self._producer.shutdown())

    def __enter__(self) -> BlockingProducer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def send(self, msg: Message, **kwargs: Any) -> SendResult:
        return run_sync(self._producer.send(msg, **kwargs))

    def send_oneway(self, msg: Message, **kwargs: Any) -> None:
        run_sync(self._producer.send_oneway(msg, **kwargs))

    def send_batch(self, msgs: Sequence[Message], **kwargs: Any) -> SendResult:
        return run_sync(self._producer.send_batch(msgs, **kwargs))


class BlockingLitePullConsumer:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._consumer: LitePullConsumer = run_sync(_construct(LitePullConsumer, *args, **kwargs))

    def subscribe(self, topic: str, expression: str = "*") -> None:
        self._consumer.subscribe(topic, expression)

    def assign(self, queues: Sequence[MessageQueue]) -> None:
        run_sync(_call(self._consumer.assign, queues))

    def start(self) -> BlockingLitePullConsumer:
        run_sync(self._consumer.start())
        return self

    def shutdown(self) -> None:
        run_sync(self._consumer.shutdown())

    def __enter__(self) -> BlockingLitePullConsumer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def poll(self, timeout: float = 5.0) -> list[MessageExt]:
        return run_sync(self._consumer.poll(timeout))

    def commit(self) -> None:
        run_sync(self._consumer.commit())


async def _call(fn: Any, *args: Any) -> Any:
    return fn(*args)
