"""The official C++ client (librocketmq 1.2.3 from PyPI's ``rocketmq`` 0.4.4) as a subprocess.

Run as ``python -m tests.interop.cpp_client <scenario> <json args>``; every result is one JSON line on stdout.
A scenario runs in a process of its own because the library keeps native threads and global
state that can hang or crash a process: the test process only reads lines.

The wheel's Python layer is used where it works (producers). Where it does not, the C API is
called through ctypes directly, with the wheel's own declarations of it (``rocketmq.ffi``):
- its push-consumer callback raises inside ctypes when the listener asks for RECONSUME_LATER,
  so the listener here is a ctypes callback of our own returning the status;
- its pull loop spins forever on BROKER_TIMEOUT, so the pull loop here is bounded.

Message bodies go through ``GetMessageBody``, a C string: scenarios use ASCII bodies only.
"""

from __future__ import annotations

import ctypes
import json
import select
import sys
import threading
import time
from typing import Any

from rocketmq import ffi
from rocketmq.client import Message, Producer

from tests.interop.bodies import body_of, digest

_out_lock = threading.Lock()


def emit(**fields: Any) -> None:
    """One JSON line, whole, whatever thread writes it (listeners run on native threads)."""
    line = json.dumps(fields, separators=(",", ":")) + "\n"
    with _out_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def describe(msg: int) -> dict[str, Any]:
    """What the client tells of a received message (a ``CMessageExt*``)."""
    dll = ffi.dll
    body = dll.GetMessageBody(msg) or b""
    return {"body": body.decode() if len(body) <= 64 else None, "digest": digest(body), "size": len(body),
            "tags": (dll.GetMessageTags(msg) or b"").decode(), "keys": (dll.GetMessageKeys(msg) or b"").decode(),
            "topic": (dll.GetMessageTopic(msg) or b"").decode(), "queue_id": dll.GetMessageQueueId(msg),
            "queue_offset": dll.GetMessageQueueOffset(msg), "reconsume_times": dll.GetMessageReconsumeTimes(msg),
            "msg_id": (dll.GetMessageId(msg) or b"").decode(), "born": dll.GetMessageBornTimestamp(msg),
            "stored": dll.GetMessageStoreTimestamp(msg)}


def _message(topic: str, spec: dict[str, Any]) -> Message:
    msg = Message(topic)
    if spec.get("tags"):
        msg.set_tags(spec["tags"])
    if spec.get("keys"):
        msg.set_keys(spec["keys"])
    body = body_of(spec)
    # SetByteMessageBody: the wheel's set_body stops at the first NUL, and is C-string based.
    ffi.dll.SetByteMessageBody(msg._handle, body, len(body))
    if spec.get("delay_level"):
        msg.set_delay_time_level(spec["delay_level"])
    for key, value in spec.get("properties", {}).items():
        msg.set_property(key, value)
    return msg


def produce(args: dict[str, Any]) -> None:
    """Send ``messages`` in ``mode`` (sync, async, oneway, orderly, batch); one line per result."""
    producer = Producer(args["group"], timeout=args.get("timeout_ms", 5000))
    producer.set_namesrv_addr(args["namesrv"])
    if args.get("credentials"):
        # ACL: the client signs every request with this account (channel as the wheel's docs)
        producer.set_session_credentials(*args["credentials"], "ALIYUN")
    ffi.dll.SetProducerInstanceName(producer._handle, args.get("instance", "cpp-producer").encode())
    producer.start()
    topic, mode, specs = args["topic"], args["mode"], args["messages"]
    try:
        if mode == "batch":
            result = producer.send_batch([_message(topic, s) for s in specs])
            emit(kind="sent", status=int(result.status), msg_id=result.msg_id, count=len(specs))
        elif mode == "async":
            done = threading.Semaphore(0)
            for i, spec in enumerate(specs):
                def ok(result: Any, i: int = i) -> None:
                    emit(kind="sent", index=i, status=int(result.status), msg_id=result.msg_id)
                    done.release()

                def failed(exc: Exception, i: int = i) -> None:
                    emit(kind="failed", index=i, error=str(exc))
                    done.release()

                producer.send_async(_message(topic, spec), ok, failed)
            for _ in specs:
                if not done.acquire(timeout=30):
                    emit(kind="failed", error="async send not answered within 30 s")
                    break
        else:
            for i, spec in enumerate(specs):
                msg = _message(topic, spec)
                if mode == "sync" and args.get("report_failures"):
                    try:
                        result = producer.send_sync(msg)
                    except Exception as exc:  # a refusal, reported as a line rather than a crash
                        emit(kind="failed", index=i, error=str(exc))
                        continue
                elif mode == "sync":
                    result = producer.send_sync(msg)
                elif mode == "orderly":
                    result = producer.send_orderly(msg, spec["sharding"])
                elif mode == "oneway":
                    producer.send_oneway(msg)
                    emit(kind="sent", index=i)
                    continue
                else:
                    raise SystemExit(f"unknown mode {mode}")
                emit(kind="sent", index=i, status=int(result.status), msg_id=result.msg_id, offset=result.offset)
    finally:
        producer.shutdown()
    emit(kind="done")


# -- push consumer, on the C API ---------------------------------------------------------------

_CONSUME_SUCCESS = 0
_RECONSUME_LATER = 1


def push(args: dict[str, Any]) -> None:
    """A push consumer that reports each delivery and runs until ``stop`` on stdin (or EOF, or
    ``max_seconds``); then it shuts down, which commits its offsets, and says ``stopped``.

    ``reconsume_later``: bodies answered RECONSUME_LATER on their first delivery (their
    reconsume times 0), so they must come back through the group's retry topic.
    """
    dll = ffi.dll
    later = set(args.get("reconsume_later", []))
    consumer = dll.CreatePushConsumer(args["group"].encode())
    dll.SetPushConsumerGroupID(consumer, args["group"].encode())
    dll.SetPushConsumerNameServerAddress(consumer, args["namesrv"].encode())
    dll.SetPushConsumerInstanceName(consumer, args.get("instance", "cpp-consumer").encode())
    if args.get("credentials"):
        access_key, secret_key = args["credentials"]
        dll.SetPushConsumerSessionCredentials(consumer, access_key.encode(), secret_key.encode(), b"ALIYUN")
    model = ffi.MessageModel.BROADCASTING if args.get("model") == "broadcasting" else ffi.MessageModel.CLUSTERING
    dll.SetPushConsumerMessageModel(consumer, model)
    dll.SetPushConsumerThreadCount(consumer, args.get("threads", 2))
    dll.Subscribe(consumer, args["topic"].encode(), args.get("expression", "*").encode())

    def on_message(_consumer: int, msg: int) -> int:
        try:
            seen = describe(msg)
            emit(kind="msg", thread=threading.get_ident(), at=int(time.time() * 1000), **seen)
            if seen["body"] in later and seen["reconsume_times"] == 0:
                return _RECONSUME_LATER
            return _CONSUME_SUCCESS
        except Exception as exc:  # a native thread must never see a Python exception
            emit(kind="error", error=repr(exc))
            return _RECONSUME_LATER

    callback = ffi.MSG_CALLBACK_FUNC(on_message)  # kept referenced until the consumer is gone
    if args.get("orderly"):
        dll.RegisterMessageCallbackOrderly(consumer, callback)
    else:
        dll.RegisterMessageCallback(consumer, callback)
    status = dll.StartPushConsumer(consumer)
    if status != 0:
        emit(kind="error", error=f"StartPushConsumer: {status} {dll.GetLatestErrorMessage()!r}")
        return
    emit(kind="started")
    deadline = time.monotonic() + args.get("max_seconds", 90)
    while time.monotonic() < deadline:
        ready, _, _ = select.select([sys.stdin], [], [], 0.5)
        if ready:
            line = sys.stdin.readline()
            if not line or line.strip() == "stop":
                break
    dll.ShutdownPushConsumer(consumer)
    dll.DestroyPushConsumer(consumer)
    emit(kind="stopped")
    del callback


# -- pull consumer, on the C API ---------------------------------------------------------------

_PULL_STATUS = {0: "FOUND", 1: "NO_NEW_MSG", 2: "NO_MATCHED_MSG", 3: "OFFSET_ILLEGAL", 4: "BROKER_TIMEOUT"}


def pull(args: dict[str, Any]) -> None:
    """Pull every queue of ``topic`` from offset 0 until NO_NEW_MSG, a bounded number of pulls."""
    dll = ffi.dll
    consumer = dll.CreatePullConsumer(args["group"].encode())
    dll.SetPullConsumerGroupID(consumer, args["group"].encode())
    dll.SetPullConsumerNameServerAddress(consumer, args["namesrv"].encode())
    if dll.StartPullConsumer(consumer) != 0:
        emit(kind="error", error=f"StartPullConsumer: {dll.GetLatestErrorMessage()!r}")
        return
    queues = ctypes.POINTER(ffi._CMessageQueue)()
    size = ctypes.c_int()
    status = dll.FetchSubscriptionMessageQueues(consumer, args["topic"].encode(), ctypes.byref(queues),
                                                ctypes.byref(size))
    if status != 0:
        emit(kind="error", error=f"FetchSubscriptionMessageQueues: {dll.GetLatestErrorMessage()!r}")
        return
    expression = args.get("expression", "*").encode()
    for i in range(size.value):
        mq = queues[i]
        offset, last = 0, None
        for _ in range(args.get("max_pulls_per_queue", 200)):
            result = dll.Pull(consumer, ctypes.byref(mq), expression, offset, 32)
            last = _PULL_STATUS.get(result.pullStatus, str(result.pullStatus))
            if result.pullStatus == 0:
                for j in range(result.size):
                    msg = result.msgFoundList[j]
                    emit(kind="msg", **describe(msg),
                         properties={k: (dll.GetMessageProperty(msg, k.encode()) or b"").decode()
                                     for k in args.get("properties", [])})
            if result.pullStatus != 4:  # BROKER_TIMEOUT: pull the same offset again
                offset = result.nextBeginOffset
            dll.ReleasePullResult(result)
            if last == "NO_NEW_MSG":
                break
        emit(kind="queue", queue_id=mq.queueId, broker=mq.brokerName.decode(), status=last, next_offset=offset)
    dll.ReleaseSubscriptionMessageQueue(queues)
    dll.ShutdownPullConsumer(consumer)
    dll.DestroyPullConsumer(consumer)
    emit(kind="done")


SCENARIOS = {"produce": produce, "push": push, "pull": pull}

if __name__ == "__main__":
    SCENARIOS[sys.argv[1]](json.loads(sys.argv[2]))
