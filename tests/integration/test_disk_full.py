"""A full disk never kills the broker nor hides what it acknowledged (docs/store-disk-full.md).

The store lives on a 64 MiB tmpfs the test mounts itself (root only: CI runs as root; elsewhere
the test is skipped and says why). The disk fills up either with another file or with the
broker's own CommitLog; either way the broker keeps running, refuses sends with
SERVICE_NOT_AVAILABLE and a remark naming the disk, every acknowledged message is read back at
its acknowledged queue offset, and sends are accepted again once space is freed.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
from collections.abc import Iterator

import pytest

from rocketmq_py.remoting import RemotingClient, RequestCode, ResponseCode
from rocketmq_py.remoting.protocol.message import decode_records
from tests.integration.broker_client import call, pull_request, send_request
from tests.integration.daemons import Daemon, DaemonSet
from tests.waiting import wait_for_async

TOPIC = "DiskFull"
QUEUES = 2
BODY = 4000
# Small files, so a 64 MiB disk holds a dozen CommitLog files and fills in seconds; the flag
# check every 200 ms (Java: 10 s) so forced cleaning shows within the test's bounds.
STORE_OPTIONS = ("mappedFileSizeCommitLog=4194304", "mappedFileSizeConsumeQueue=60000", "maxHashSlotNum=1000",
                 "maxIndexNum=4000", "cleanResourceInterval=200", "flushIntervalCommitLog=100")
SEND_LIMIT = 40_000  # bounds the fill loops: 64 MiB holds about 16,000 sends of this size


@pytest.fixture
def tmpfs_store(daemons: DaemonSet) -> Iterator[str]:
    """A 64 MiB tmpfs where the broker named broker-a keeps its store; unmounted after its daemons stop."""
    path = os.path.join(daemons.root, "broker-a", "store")
    os.makedirs(path)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", path], capture_output=True, text=True,
                          timeout=20, check=False)
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {done.stderr.strip()}")
    try:
        yield path
    finally:
        daemons.stop_all()  # the daemons fixture checks their exit codes after this
        if subprocess.run(["umount", path], capture_output=True, timeout=20, check=False).returncode != 0:
            subprocess.run(["umount", "-l", path], capture_output=True, timeout=20, check=False)


def fill_file(path: str, leave_free: int) -> None:
    """A file that takes all but ``leave_free`` bytes of its filesystem."""
    stat = os.statvfs(os.path.dirname(path))
    size = stat.f_bavail * stat.f_frsize - leave_free
    with open(path, "wb") as f:
        chunk = bytes(1 << 20)
        while size > 0:
            f.write(chunk[:min(size, len(chunk))])
            size -= len(chunk)


class Sender:
    """Sends numbered messages; remembers every acknowledged one and the codes of the refusals."""

    def __init__(self, client: RemotingClient, broker: Daemon) -> None:
        self.client = client
        self.broker = broker
        self.seq = 0
        self.acked: dict[tuple[int, int], tuple[int, bytes]] = {}  # (queue, queue offset) -> (seq, body)
        self.refusals: list[tuple[int, str]] = []

    async def send(self) -> bool:
        seq = self.seq
        self.seq += 1
        body = (f"{seq:08d}".encode() * (BODY // 8))[:BODY]
        r = await self.client.invoke(self.broker.addr, send_request(TOPIC, body, queue_id=seq % QUEUES), 10)
        if r.code == ResponseCode.SUCCESS:
            key = (int(r.ext_fields["queueId"]), int(r.ext_fields["queueOffset"]))
            assert key not in self.acked, f"queue offset {key} acknowledged twice"
            self.acked[key] = (seq, body)
            return True
        self.refusals.append((r.code, r.remark or ""))
        return False

    async def until_refused(self) -> None:
        """Send 16 at a time until the broker refuses (bounded by SEND_LIMIT)."""
        while self.seq < SEND_LIMIT:
            results = await asyncio.gather(*(self.send() for _ in range(16)))
            assert self.broker.alive(), "the broker died"
            if not all(results):
                return
        raise AssertionError(f"{SEND_LIMIT} sends and no refusal")

    def assert_refused_as_full(self) -> None:
        assert self.refusals, "no send was refused"
        for code, remark in self.refusals:
            assert code == ResponseCode.SERVICE_NOT_AVAILABLE and "disk" in remark, (code, remark)

    async def accepted_again(self, timeout: float = 20.0) -> bool:
        return await wait_for_async(self.send, timeout, 0.1)

    async def read_back(self, min_offset_of: dict[int, int] | None = None) -> None:
        """Every acknowledged message at its queue offset, byte for byte (below ``min_offset_of``
        a queue's messages were deleted by forced cleaning and are not expected)."""
        for qid in range(QUEUES):
            expected = sorted(off for q, off in self.acked if q == qid)
            floor = (min_offset_of or {}).get(qid, 0)
            offset, found = floor, {}
            while offset <= (expected[-1] if expected else -1):
                r = await self.client.invoke(self.broker.addr, pull_request("disk_full_check", TOPIC, qid, offset), 10)
                assert r.code == ResponseCode.SUCCESS, f"queue {qid} offset {offset}: {r.code} {r.remark}"
                for msg in decode_records(r.body):
                    found[msg.queue_offset] = msg.body
                offset = int(r.ext_fields["nextBeginOffset"])
            for off in expected:
                if off >= floor:
                    assert found.get(off) == self.acked[(qid, off)][1], f"acknowledged message {qid}:{off} lost"


async def start(daemons: DaemonSet, *options: str) -> tuple[Daemon, RemotingClient]:
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr, *STORE_OPTIONS, *options)
    client = RemotingClient()
    created = await call(client, broker.addr, RequestCode.UPDATE_AND_CREATE_TOPIC,
                         {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": str(QUEUES),
                          "writeQueueNums": str(QUEUES), "perm": "6", "topicFilterType": "SINGLE_TAG"})
    assert created.code == ResponseCode.SUCCESS, created.remark
    return broker, client


async def test_disk_filled_by_another_file(daemons: DaemonSet, tmpfs_store: str) -> None:
    broker, client = await start(daemons)
    try:
        sender = Sender(client, broker)
        for _ in range(50):
            assert await sender.send()
        # 96 % full: what is left is less than a CommitLog file, and above the 0.90 warning ratio.
        ballast = os.path.join(tmpfs_store, "ballast")
        stat = os.statvfs(tmpfs_store)
        fill_file(ballast, int(stat.f_blocks * stat.f_frsize * 0.04))
        await sender.until_refused()
        sender.assert_refused_as_full()
        assert broker.alive()
        await sender.read_back()
        os.remove(ballast)
        assert await sender.accepted_again(), "sends still refused after the disk was freed"
        for _ in range(200):  # past the file the full disk refused
            assert await sender.send()
        await sender.read_back()
        assert broker.alive()
    finally:
        await client.close()


async def test_disk_filled_by_the_broker_log(daemons: DaemonSet, tmpfs_store: str) -> None:
    """Forced cleaning off: the broker fills the disk with its own log and refuses; an operator
    frees space (here: removes a file put there before) and it accepts again."""
    ballast = os.path.join(tmpfs_store, "ballast")
    fill_file(ballast, 40 << 20)  # the broker has 40 MiB, ten CommitLog files
    broker, client = await start(daemons, "cleanFileForciblyEnable=false")
    try:
        sender = Sender(client, broker)
        await sender.until_refused()
        sender.assert_refused_as_full()
        assert len(sender.acked) > 5000, f"only {len(sender.acked)} sends fitted: the log did not fill the disk"
        await sender.read_back()
        os.remove(ballast)
        assert await sender.accepted_again(), "sends still refused after the disk was freed"
        for _ in range(200):
            assert await sender.send()
        await sender.read_back()
        assert broker.alive()
    finally:
        await client.close()


_FORCED = re.compile(r"forcibly deleted commit log files \[.*\] holding offsets \[(\d+), (\d+)\)")


async def test_forced_cleaning_on_a_full_disk(daemons: DaemonSet, tmpfs_store: str) -> None:
    """Java's default: above diskSpaceCleanForciblyRatio the oldest CommitLog files are deleted
    even unconsumed, with a WARN line naming them and the offsets they held; the broker never
    dies on the way, and what was not deleted is still read at its acknowledged offset."""
    broker, client = await start(daemons)
    try:
        sender = Sender(client, broker)

        def forced() -> bool:
            return any(_FORCED.search(line) for line in broker.lines)

        # Until the cleaning shows (it may keep up before the warning ratio refuses anything).
        while not forced() and sender.seq < SEND_LIMIT:
            await asyncio.gather(*(sender.send() for _ in range(16)))
            assert broker.alive(), "the broker died"
        assert forced(), "no forced cleaning line in the broker's log"
        # Twice the disk more: it fills, is cleaned and fills again (where SIGBUS used to strike).
        for _ in range(2 * (64 << 20) // BODY // 16):
            await asyncio.gather(*(sender.send() for _ in range(16)))
            assert broker.alive(), "the broker died"
        if sender.refusals:
            sender.assert_refused_as_full()
        assert await sender.accepted_again(), "sends still refused after forced cleaning freed space"
        min_offsets = {}
        for qid in range(QUEUES):
            r = await call(client, broker.addr, RequestCode.GET_MIN_OFFSET, {"topic": TOPIC, "queueId": str(qid)})
            min_offsets[qid] = int(r.ext_fields["offset"])
        assert any(min_offsets.values()), "forced cleaning deleted nothing"
        await sender.read_back(min_offsets)
    finally:
        await client.close()
