"""Kill a store writer with SIGKILL under load, again and again: nothing acknowledged is lost."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from rocketmq_py.remoting.protocol.message import decode_record
from rocketmq_py.store.message_store import DefaultMessageStore, GetMessageStatus
from tests.chaos.store_writer import body_for
from tests.integration.daemons import ROOT
from tests.store_helpers import small_config

WRITER = os.path.join(os.path.dirname(__file__), "store_writer.py")
ROUNDS = 20


def run_and_kill(root: str, flush: str, start_seq: int, rng: random.Random) -> list[tuple[int, int, int, int]]:
    """One writer process, killed at a random moment; returns the acknowledged puts."""
    proc = subprocess.Popen([sys.executable, WRITER, root, flush, str(start_seq)], stdout=subprocess.PIPE, text=True,
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.stdout is not None
    acks: list[tuple[int, int, int, int]] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("READY"):
                ready.set()
            elif line.startswith("ACK "):
                _, seq, qid, qoff, phy = line.split()
                acks.append((int(seq), int(qid), int(qoff), int(phy)))
        ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert ready.wait(30), "writer did not start"
    time.sleep(rng.uniform(0.05, 0.6))  # the random moment of the crash, not a synchronization
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    reader.join(10)
    proc.stdout.close()
    return acks


async def verify(root: str, acked: dict[int, tuple[int, int, int]], after_crash: bool = True) -> None:
    store = DefaultMessageStore(small_config(root, mappedFileSizeCommitLog=256 * 1024))
    clean = await store.load()
    assert clean != after_crash, "a killed writer leaves the abort file: recovery must be abnormal"
    try:
        for seq, (qid, qoff, phy) in acked.items():
            by_offset = store.look_message_by_offset(phy)
            assert by_offset is not None, f"acknowledged message {seq} lost at commit-log offset {phy}"
            got = store.get_message("verify", "Crash", qid, qoff, 1)
            assert got.status == GetMessageStatus.FOUND, f"message {seq} not in its consume queue ({got.status})"
            assert got.buffers[0] == by_offset, f"queue and log disagree on message {seq}"
            msg = decode_record(by_offset)
            assert msg.body == body_for(seq) and msg.queue_offset == qoff and msg.properties["KEYS"] == f"seq{seq}"
    finally:
        await store.start()
        await store.shutdown()


@pytest.mark.slow
@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_sigkill_under_load_loses_nothing_acknowledged(tmp_path: str, flush: str) -> None:
    rng = random.Random(f"crash-{flush}")
    root = os.path.join(str(tmp_path), flush)
    acked: dict[int, tuple[int, int, int]] = {}
    seq = 0
    for _ in range(ROUNDS):
        acks = run_and_kill(root, flush, seq, rng)
        new = {s: (qid, qoff, phy) for s, qid, qoff, phy in acks}
        acked.update(new)
        seq += 1_000_000  # sequence numbers of a round never collide with the last one's
        asyncio.run(verify(root, new))
    # Later crashes and recoveries must not have damaged what earlier rounds wrote.
    asyncio.run(verify(root, acked, after_crash=False))
    assert len(acked) > ROUNDS * 10, f"only {len(acked)} puts were acknowledged: the load was too light"
