"""rocketmq-py as a peer of ../shared/bench's harness (``peers.py --adapter``).

    cd ../shared/bench
    .venv-bench/bin/python peers.py --out ours.json --peers redis-everysec,nats-js \\
        --adapter ../../main/bench/peer_adapter.py:make_adapter

The harness's venv need not have this project installed: the adapter puts the project root, and
the project's own ``.venv`` site-packages, on ``sys.path``, and starts ``mqnamesrv`` and
``mqbroker`` with the project's Python. Producer: the SDK's ``Producer`` (sync sends, batches).
Consumer: ``LitePullConsumer`` assigned every queue, long-polling pulls of ``batch`` messages,
offsets committed every 5 s (RocketMQ's at-least-once model: ``ack`` has nothing left to do).
``PEER_ADAPTER_BROKER_OPTS="key=value key=value"`` passes broker options (``-o``), for A/B runs.
``make_mypyc_adapter`` runs the daemons of the mypyc build beside these (``--peers none --adapter
...:make_adapter --adapter ...:make_mypyc_adapter``: the pure and compiled daemons in one run).

The SDK runs with its defaults, as a user gets it: nothing here tunes the client beyond them.
``PEER_ADAPTER_CLIENT_POLL_MICROS`` sets the clients' ``busy_poll_max_micros`` for A/B runs only
(unset: the SDK's default).
"""

from __future__ import annotations

import asyncio
import glob
import os
import site
import subprocess
import sys
import time
from collections.abc import Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROJECT_PYTHON = os.path.join(ROOT, ".venv", "bin", "python")
# The mypyc build's daemons (`make .venv-mypyc/.installed-mypyc`), for make_mypyc_adapter.
MYPYC_PYTHON = os.path.join(ROOT, ".venv-mypyc", "bin", "python")
sys.path.insert(0, ROOT)
for site_dir in glob.glob(os.path.join(ROOT, ".venv", "lib", "python*", "site-packages")):
    site.addsitedir(site_dir)  # its .pth files too: the editable install's finder maps the subpackages

from peerbench.adapter import ConsumerHandle, PeerAdapter, Received  # noqa: E402

from rocketmq_py.client import Message, Producer  # noqa: E402
from rocketmq_py.client.allocate import MessageQueue  # noqa: E402
from rocketmq_py.client.lite_pull_consumer import LitePullConsumer  # noqa: E402
from rocketmq_py.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode  # noqa: E402
from rocketmq_py.remoting.protocol.heartbeat import ConsumeFromWhere  # noqa: E402

QUEUES = 8
CLIENT_POLL_MICROS = os.environ.get("PEER_ADAPTER_CLIENT_POLL_MICROS")


def _boot(argv: list[str], marker: str, timeout: float = 60.0) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    for line in proc.stdout:
        if marker in line:
            if "address " in line:
                return proc, line.rsplit("address ", 1)[1].strip()
            return proc, line.split("[", 1)[1].split("]", 1)[0].split(", ", 1)[1]
        if time.monotonic() > deadline:
            break
    proc.kill()
    raise RuntimeError(f"{argv[2]} did not boot")


class RocketMQPyAdapter(PeerAdapter):
    name = "rocketmq-py"
    durability = "commit log on mmap, ASYNC_FLUSH (acknowledged once in the page cache)"
    consumer_model = "lite pull: long-polling pulls per queue, batch N, offsets committed every 5 s"

    def __init__(self, python: str = PROJECT_PYTHON, name: str = "rocketmq-py") -> None:
        self.python = python if os.path.exists(python) else sys.executable
        self.name = name
        self.procs: list[subprocess.Popen[str]] = []
        self.namesrv = ""
        self.broker = ""
        self.producer: Producer | None = None
        self.admin: RemotingClient | None = None

    def start_server(self, workdir: str) -> None:
        python = self.python
        workdir = os.path.join(workdir, self.name)  # two builds' daemons side by side in one run
        extra = [arg for opt in os.environ.get("PEER_ADAPTER_BROKER_OPTS", "").split() for arg in ("-o", opt)]
        ns, self.namesrv = _boot([python, "-m", "rocketmq_py.namesrv.startup", "--listen-port", "0", "--bind-address",
                                  "127.0.0.1", "--home", os.path.join(workdir, "ns"), "--log-level", "WARNING"],
                                 "boot success")
        self.procs.append(ns)
        broker, self.broker = _boot([python, "-m", "rocketmq_py.broker.startup", "-n", self.namesrv,
                                     "--listen-port", "0",
                                     "--store", os.path.join(workdir, "store"), "-o", "brokerIP1=127.0.0.1",
                                     "-o", "bindAddress=127.0.0.1", "-o", "brokerName=broker-a",
                                     *extra, "--log-level", "WARNING"], "boot success")
        self.procs.append(broker)

    def stop_server(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
            if proc.stdout:
                proc.stdout.close()
        self.procs = []

    def server_pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def versions(self) -> dict[str, str]:
        build = "mypyc build" if self.python == MYPYC_PYTHON else "pure Python"
        return {"server": f"rocketmq-py (main, {build})", "client": "rocketmq-py SDK"}

    async def connect(self) -> None:
        self.producer = Producer("peerbench_pg", self.namesrv, send_msg_timeout=10)
        if CLIENT_POLL_MICROS is not None:
            self.producer.config.busy_poll_max_micros = int(CLIENT_POLL_MICROS)
        await self.producer.start()
        self.admin = RemotingClient()

    async def close(self) -> None:
        if self.producer:
            await self.producer.shutdown()
        if self.admin:
            await self.admin.close()

    async def _admin(self, addr: str, code: int, header: dict[str, str]) -> RemotingCommand:
        assert self.admin is not None
        return await self.admin.invoke(addr, RemotingCommand.request(code, header), 10)

    async def create_topic(self, topic: str) -> None:
        r = await self._admin(self.broker, RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(QUEUES), "writeQueueNums": str(QUEUES),
            "perm": "6", "topicFilterType": "SINGLE_TAG"})
        if r.code != ResponseCode.SUCCESS:
            raise RuntimeError(r.remark)
        for _ in range(200):  # the broker registers the new topic at once; wait for its route (bounded)
            if (await self._admin(self.namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})).code == 0:
                return
            await asyncio.sleep(0.01)
        raise RuntimeError(f"topic {topic} never got a route")

    async def delete_topic(self, topic: str) -> None:
        await self._admin(self.broker, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})
        await self._admin(self.namesrv, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic})

    async def produce(self, topic: str, body: bytes) -> None:
        assert self.producer is not None
        await self.producer.send(Message(topic, body))

    async def produce_batch(self, topic: str, bodies: Sequence[bytes]) -> None:
        assert self.producer is not None
        await self.producer.send_batch([Message(topic, b) for b in bodies])

    async def open_consumer(self, topic: str, group: str, *, batch: int, prefetch: int) -> ConsumerHandle:
        consumer = LitePullConsumer(group, self.namesrv, pull_batch_size=batch,
                                    consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                                    pull_threshold_for_all=max(prefetch, batch) * QUEUES)
        if CLIENT_POLL_MICROS is not None:
            consumer.config.busy_poll_max_micros = int(CLIENT_POLL_MICROS)
        consumer.assign([MessageQueue(topic, "broker-a", q) for q in range(QUEUES)])
        await consumer.start()
        return _Consumer(consumer)


class _Consumer(ConsumerHandle):
    def __init__(self, consumer: LitePullConsumer) -> None:
        self.consumer = consumer

    async def fetch(self, max_msgs: int, timeout_s: float) -> list[Received]:
        return [Received(m.body, m.queue_offset) for m in (await self.consumer.poll(timeout_s))[:max_msgs]]

    async def ack(self, msgs: Sequence[Received]) -> None:
        """Offsets advanced when the batch was polled and are committed every 5 s."""

    async def close(self) -> None:
        await self.consumer.shutdown()


def make_adapter() -> RocketMQPyAdapter:
    return RocketMQPyAdapter()


def make_mypyc_adapter() -> RocketMQPyAdapter:
    """The NameServer and broker of the mypyc build, beside make_adapter's pure ones in the same run
    (``--adapter ...:make_adapter --adapter ...:make_mypyc_adapter``): an A/B of the daemons, whose
    client (the harness's process, one build) is the same for both."""
    if not os.path.exists(MYPYC_PYTHON):
        raise RuntimeError(f"{MYPYC_PYTHON} missing: make .venv-mypyc/.installed-mypyc")
    return RocketMQPyAdapter(MYPYC_PYTHON, "rocketmq-py-mypyc")
