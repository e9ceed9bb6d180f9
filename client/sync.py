"""A blocking facade over the async SDK, for scripts and notebooks with no event loop.

One event loop runs on a background thread for the whole process; each blocking call submits
its coroutine there and waits for the result, so producers and consumers keep their long
connections and background tasks (heartbeats, pulls) between calls.
"""

from __future__ import annotations

import asyncio
import atexit
import queue
import threading
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from rocketmq_py.client.allocate import MessageQueue
from rocketmq_py.client.lite_pull_consumer import LitePullConsumer
from rocketmq_py.client.message import Message, SendResult
from rocketmq_py.client.producer import Producer
from rocketmq_py.client.transaction_producer import (
    LocalTransactionState,
    TransactionListener,
    TransactionProducer,
    TransactionSendResult,
)
from rocketmq_py.common.loop import loop_factory
from rocketmq_py.remoting.protocol.message import MessageExt

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
            atexit.register(_stop, loop, thread)
        return _loop


def _stop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    """At exit, the loop stopped and its thread gone (bounded) before the interpreter tears down:
    a daemon thread still inside the loop (busy polling keeps it there between reads) while the
    interpreter finalizes can crash it (a script exited -11 after its last line, once, in CI)."""
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5.0)


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


class BlockingTransactionProducer(BlockingProducer):
    """Java's TransactionMQProducer for plain scripts, with a listener of plain functions.

    The local transaction runs in the thread that called ``send_message_in_transaction``, as in
    Java (whatever it has bound to that thread, a database session say, is there), and
    check-backs run in a worker thread: neither ever runs on the SDK's loop, where a slow one
    would hold up heartbeats and pulls."""

    def __init__(self, *args: Any, transaction_listener: TransactionListener, **kwargs: Any) -> None:
        self._listener = transaction_listener
        self._producer: TransactionProducer = run_sync(_construct(
            TransactionProducer, *args, transaction_listener=_OffTheLoop(transaction_listener), **kwargs))

    def start(self) -> BlockingTransactionProducer:
        run_sync(self._producer.start())
        return self

    def __enter__(self) -> BlockingTransactionProducer:
        return self.start()

    def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        loop = _background_loop()
        caller = _Caller(arg)
        done = asyncio.run_coroutine_threadsafe(self._producer.send_message_in_transaction(msg, caller), loop)
        done.add_done_callback(lambda _: caller.requests.put(None))
        while (request := caller.requests.get()) is not None:
            half, answer = request
            try:
                state = self._listener.execute_local_transaction(half, arg)
            except Exception as exc:  # the producer logs it and leaves the outcome UNKNOW
                loop.call_soon_threadsafe(_settle, answer, None, exc)
            else:
                loop.call_soon_threadsafe(_settle, answer, state, None)
        return done.result()


class _Caller:
    """The user's ``arg``, carried through the async producer with the way back to the thread
    that is waiting in ``send_message_in_transaction``."""

    def __init__(self, arg: Any) -> None:
        self.arg = arg
        self.requests: queue.SimpleQueue[tuple[Message, asyncio.Future[Any]] | None] = queue.SimpleQueue()


class _OffTheLoop:
    """The async producer's listener: hands each call to a thread instead of running it."""

    def __init__(self, listener: TransactionListener) -> None:
        self.listener = listener

    async def execute_local_transaction(self, msg: Message, caller: _Caller) -> Any:
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        caller.requests.put((msg, answer))
        return await answer

    async def check_local_transaction(self, msg: MessageExt) -> Any:
        return await asyncio.to_thread(self.listener.check_local_transaction, msg)


def _settle(answer: asyncio.Future[Any], state: LocalTransactionState | None, error: BaseException | None) -> None:
    if answer.done():
        return
    if error is not None:
        answer.set_exception(error)
    else:
        answer.set_result(state)


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

    def seek(self, mq: MessageQueue, offset: int) -> None:
        run_sync(self._consumer.seek(mq, offset))

    def commit(self) -> None:
        run_sync(self._consumer.commit())


async def _call(fn: Any, *args: Any) -> Any:
    return fn(*args)
