"""The index built by a child process (store/index_dispatch.py): keys findable as soon as their
put returns, the same answers as the inline index, a dead child replaced, an unfinished index
completed at the next start, and a child that outlives its store's process leaving on its own."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import struct
import sys
import tempfile
import textwrap
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketmq_py.remoting.protocol.message import (
    BLANK_MAGIC_CODE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    MessageExt,
    decode_record,
    encode_record,
)
from rocketmq_py.store.index_dispatch import (
    IndexDispatchProcess,
    _CommitLogReader,
    index_records,
    keyless_to,
    read_indexed_offset,
    wait_for_previous_child,
)
from rocketmq_py.store.index_file import topic_key_hash
from rocketmq_py.store.message_store import DefaultMessageStore
from tests.store_helpers import batch, index_caught_up, message, restarted, small_config
from tests.waiting import wait_until

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


async def _started(root: str, **overrides: object) -> DefaultMessageStore:
    s = DefaultMessageStore(small_config(root, **overrides))
    await s.load()
    await s.start()
    return s


async def _bodies(s: DefaultMessageStore, topic: str, key: str) -> list[bytes]:
    return sorted(decode_record(b).body for b in await s.query_message(topic, key, 64, 0, 2**62))


async def test_a_key_is_findable_as_soon_as_its_put_returns(tmp_path: str) -> None:
    s = await _started(str(tmp_path))
    try:
        assert s.index_dispatch is not None and s.index_dispatch.alive()
        pid = s.index_dispatch.pid
        assert pid is not None
        assert os.getpriority(os.PRIO_PROCESS, pid) == os.getpriority(os.PRIO_PROCESS, 0), \
            "the child indexes at the daemon's priority, as Java's reput thread: lower, it fell behind"
        await s.put_message(message("Warm", b"w", keys="warm"))
        await index_caught_up(s)  # the child has started: the promise below is a running child's
        for i in range(200):
            await s.put_message(message("K", f"m{i}".encode(), keys=f"key{i} shared", uniq=f"U{i}"))
            if i % 40 == 0:  # asked at once, with no wait of our own
                assert await _bodies(s, "K", f"key{i}") == [f"m{i}".encode()]
                assert await _bodies(s, "K", f"U{i}") == [f"m{i}".encode()]
        assert len(await s.query_message("K", "shared", 64, 0, 2**62)) == 64
        assert await _bodies(s, "Other", "key3") == []
        # IPv6 hosts move the fields the child reads; a non-ASCII key hashes by UTF-16 units.
        await s.put_message(message("K", b"six", keys="v6 \u00e9t\u00e9", born_host=("::1", 5555)))
        assert await _bodies(s, "K", "v6") == [b"six"] and await _bodies(s, "K", "\u00e9t\u00e9") == [b"six"]
        both = message("K", b"both", keys="v6both", born_host=("::1", 5555))
        both.store_host = ("::1", 10911)
        await s.put_message(both)
        assert await _bodies(s, "K", "v6both") == [b"both"]
        end = s.commit_log.max_offset
    finally:
        await s.shutdown()
    assert read_indexed_offset(str(tmp_path)) == end, "a clean stop indexes everything and says so"
    s = await _started(str(tmp_path))
    try:
        assert await _bodies(s, "K", "key199") == [b"m199"]
    finally:
        await s.shutdown()


async def test_child_and_inline_index_answer_alike(tmp_path: str) -> None:
    answers: list[Any] = []  # per run: the bodies found by key, then the count of index files
    for mode in (True, False):
        s = await _started(os.path.join(str(tmp_path), str(mode)), messageIndexInChildProcess=mode)
        try:
            for i in range(300):  # small index files (256 entries): several files, rolled by both
                await s.put_message(message("A", f"a{i}".encode(), keys=f"k{i % 7}", uniq=f"U{i}"))
            # A batch; a name that ends in KEYS is not KEYS; empty keys between separators.
            await s.put_messages(batch("A", [f"b{i}".encode() for i in range(40)],
                                       properties=[f"MYKEYS\x01decoy\x02KEYS\x01 k{i}  kb " for i in range(40)]))
            await s.put_message(message("A", b"c", extra={"XUNIQ_KEY": "decoy", "NOTKEYS": "decoy"}))
            keys = [f"k{j}" for j in range(7)] + ["U299", "kb", "decoy", "k39"]
            await index_caught_up(s)
            answers.append([await _bodies(s, "A", key) for key in keys])
            answers.append(len(os.listdir(os.path.join(s.root, "index"))))
        finally:
            await s.shutdown()
    assert answers[0] == answers[2] and answers[1] == answers[3]
    assert answers[1] >= 2
    assert answers[0][-3:] == [sorted(f"b{i}".encode() for i in range(40)), [], [b"b39"]]


async def test_a_dead_child_is_replaced_and_catches_up(tmp_path: str) -> None:
    s = await _started(str(tmp_path), flushIntervalConsumeQueue=20)
    try:
        dispatch = s.index_dispatch
        assert dispatch is not None
        await s.put_message(message("D", b"before", keys="before"))
        os.kill(dispatch._proc.pid, signal.SIGKILL)  # type: ignore[union-attr]
        await s.put_message(message("D", b"during", keys="during"))
        assert await wait_until(lambda: dispatch.restarts == 1 and dispatch.alive(), timeout=10)
        await index_caught_up(s)
        assert await _bodies(s, "D", "during") == [b"during"]
        assert await _bodies(s, "D", "before") == [b"before"]
    finally:
        await s.shutdown()


async def test_an_index_left_unfinished_is_completed_at_the_next_start(tmp_path: str) -> None:
    root = str(tmp_path)
    s = await _started(root)
    dispatch = s.index_dispatch
    assert dispatch is not None
    await s.put_message(message("U", b"early", keys="early"))
    assert dispatch.wait_indexed(5.0)
    # The child is stopped before it can see the rest: the store shuts down cleanly without it.
    os.kill(dispatch._proc.pid, signal.SIGSTOP)  # type: ignore[union-attr]
    try:
        for i in range(20):
            await s.put_message(message("U", f"late{i}".encode(), keys=f"late{i}"))
    finally:
        os.kill(dispatch._proc.pid, signal.SIGKILL)  # type: ignore[union-attr]
    await s.shutdown()
    assert read_indexed_offset(root) < s.commit_log.max_offset
    s = DefaultMessageStore(small_config(root, messageIndexInChildProcess=False))
    assert await s.load(), "the shutdown was clean"
    await s.start()
    try:
        assert await _bodies(s, "U", "late19") == [b"late19"] and await _bodies(s, "U", "early") == [b"early"]
    finally:
        await s.shutdown()


async def test_the_child_leaves_when_its_store_process_dies(tmp_path: str) -> None:
    root = str(tmp_path)
    script = textwrap.dedent(f"""
        import asyncio, sys
        from rocketmq_py.store.message_store import DefaultMessageStore
        from tests.store_helpers import batch, message, small_config
        async def main():
            s = DefaultMessageStore(small_config({root!r}))
            await s.load()
            await s.start()
            await s.put_message(message("P", b"x", keys="x"))
            print(s.index_dispatch._proc.pid, flush=True)
            await asyncio.sleep(60)
        asyncio.run(main())
    """)
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", script, stdout=asyncio.subprocess.PIPE,
                                                cwd=PROJECT)
    assert proc.stdout is not None
    child = int(await asyncio.wait_for(proc.stdout.readline(), 30))
    proc.kill()
    await proc.wait()

    def gone() -> bool:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return True
        # Reparented zombies count as gone once they have exited.
        with open(f"/proc/{child}/stat") as f:
            return f.read().split(") ", 1)[1].startswith("Z")

    assert await wait_until(gone, timeout=10)
    wait_for_previous_child(root, 1.0)  # its lock is free: a new store may start at once


async def test_a_ctrl_c_to_the_process_group_leaves_the_child_to_its_parent(tmp_path: str) -> None:
    s = await _started(str(tmp_path))
    try:
        dispatch = s.index_dispatch
        assert dispatch is not None
        await s.put_message(message("C", b"one", keys="one"))
        assert dispatch.wait_indexed(5.0)  # started and past its set-up
        for sig in (signal.SIGINT, signal.SIGTERM):
            os.kill(dispatch._proc.pid, sig)  # type: ignore[union-attr]
        await s.put_message(message("C", b"two", keys="two"))
        assert await _bodies(s, "C", "two") == [b"two"] and dispatch.alive() and dispatch.restarts == 0
    finally:
        await s.shutdown()


async def test_a_query_waiting_for_a_lagging_child_leaves_the_event_loop_free(tmp_path: str) -> None:
    s = await _started(str(tmp_path))
    dispatch = s.index_dispatch
    assert dispatch is not None and dispatch.pid is not None
    pid = dispatch.pid
    try:
        await s.put_message(message("Warm", b"w", keys="warm"))
        await index_caught_up(s)  # a running child, not one still importing, is what lags here
        os.kill(pid, signal.SIGSTOP)  # the child falls behind, as it may under load
        await s.put_message(message("Q", b"late", keys="late-key"))
        query = asyncio.ensure_future(s.query_message("Q", "late-key", 8, 0, 2**62))
        longest = 0.0
        for _ in range(20):
            before = time.monotonic()
            await asyncio.sleep(0.01)
            longest = max(longest, time.monotonic() - before)
        # A blocking wait would hold the loop for its whole second, then give up.
        assert longest < 0.5 and not query.done(), "the loop runs on while the query waits for the index"
        os.kill(pid, signal.SIGCONT)
        found = await asyncio.wait_for(query, 5)
        assert [decode_record(b).body for b in found] == [b"late"], "and the query still reads its own write"
    finally:
        os.kill(pid, signal.SIGCONT)
        await s.shutdown()


class _Entries:
    """What index_records hands the IndexFile, kept."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, int, int]] = []

    def put_entries(self, hashes: list[int], phys: list[int], stamps: list[int]) -> None:
        self.entries += zip(hashes, phys, stamps, strict=True)


_WORDS = st.text(alphabet="abKEYSUNIQ_\u00e9\u4e2d ", max_size=12)
# A producer's message ids: a head shared with the ids before, then a counter (and some not so).
_IDS = st.builds(str.__add__, st.sampled_from(["31FC43AD47EC26B4CE8C8119", "7F0000010A1B18B4AAC2", "\u00e9KEY"]),
                 st.text(alphabet="0123456789ABCDEF\u00e9", max_size=8))
_PROPERTY_NAMES = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "MYKEYS", "XUNIQ_KEY", "KEY", "WAIT"])
_RECORDS = st.lists(st.tuples(
    st.sampled_from(["T", "TopicKEY", "\u00e9t\u00e9"]),
    st.dictionaries(_PROPERTY_NAMES, _WORDS.filter(bool) | _IDS, max_size=4),
    st.one_of(st.binary(max_size=300), st.sampled_from([b"KEYS\x01k", b"\x02UNIQ_KEY\x01u"])),
    st.sampled_from([0, TRANSACTION_ROLLBACK_TYPE, TRANSACTION_PREPARED_TYPE]),
    st.sampled_from([("10.0.0.1", 1), ("::1", 2)]), st.sampled_from([("10.0.0.2", 3), ("::2", 4)]),
    st.booleans()), min_size=1, max_size=25)


@settings(max_examples=150, deadline=None)
@given(records=_RECORDS)
def test_index_records_finds_every_key_of_every_record(records: list[Any]) -> None:
    """Generated records (IPv4 and IPv6 hosts, rolled back, names that merely contain KEY, keys in
    bodies, files ending in BLANKs of any length) in files of 2 KiB, read in the spans the log was
    committed in: each record's KEYS and UNIQ_KEY, as its properties hold them, and nothing else."""
    file_size = 2048
    with tempfile.TemporaryDirectory() as d:
        files: dict[int, bytearray] = {}
        expected: list[tuple[int, int, int]] = []
        stops, last_ts = [], {}
        offset = 0
        for i, (topic, props, body, sys_flag, born, stored, commit) in enumerate(records):
            msg = MessageExt(topic=topic, body=body, sys_flag=sys_flag, born_host=born, store_host=stored,
                             store_timestamp=1700000000000 + i, properties=props)
            data = encode_record(msg)
            pos = offset % file_size
            if pos + len(data) + 8 > file_size:  # as Java ends a file: a BLANK over the rest
                struct.pack_into(">ii", files.setdefault(offset - pos, bytearray(file_size)), pos,
                                 file_size - pos, BLANK_MAGIC_CODE)
                offset += file_size - pos
            data = encode_record(MessageExt(**{**msg.__dict__, "commit_log_offset": offset}))
            assert len(data) + 8 <= file_size
            f = files.setdefault(offset - offset % file_size, bytearray(file_size))
            f[offset % file_size:offset % file_size + len(data)] = data
            if sys_flag != TRANSACTION_ROLLBACK_TYPE:
                keys = [k for k in props.get("KEYS", "").split(" ") if k]
                keys += [props["UNIQ_KEY"]] if "UNIQ_KEY" in props else []
                expected += [(topic_key_hash(topic, k), offset, msg.store_timestamp) for k in keys]
            offset += len(data)
            last_ts[offset] = msg.store_timestamp
            if commit or i == len(records) - 1:
                stops.append(offset)
        for start, content in files.items():
            with open(os.path.join(d, f"{start:020d}"), "wb") as out:
                out.write(content)
        reader = _CommitLogReader(d, file_size)
        index = _Entries()
        at = 0
        for stop in stops:
            at, ts = index_records(reader, index, at, stop)  # type: ignore[arg-type]
            assert (at, ts) == (stop, last_ts[stop])
        for mm in reader.maps.values():
            mm.close()
    assert index.entries == expected


@settings(max_examples=200, deadline=None)
@given(puts=st.lists(st.tuples(st.booleans(), st.integers(1, 3000), st.booleans()), min_size=1, max_size=30))
def test_the_child_steps_over_only_puts_known_to_name_no_key(puts: list[tuple[bool, int, bool]]) -> None:
    """Puts (keyless or not, some after a gap such as a file's BLANK end) told to the control file
    as the store tells them: after each, from every offset a child may have reached (a put's end),
    it skips to the committed offset exactly when the puts since follow on one another from there
    and all name no key."""
    with tempfile.TemporaryDirectory() as d:
        dispatch = IndexDispatchProcess(d, d, 1 << 30, 64, 256, 1000)
        dispatch._spawn = lambda: None  # type: ignore[method-assign]  # the control file alone
        dispatch.start(0, 0)
        try:
            ctrl = dispatch._ctrl
            assert ctrl is not None
            done: list[tuple[int, int, bool]] = []  # (start, end, keyless) of each put
            end = 0
            for keyless, size, gap in puts:
                start = end + (100 if gap else 0)
                end = start + size
                if keyless:
                    dispatch.committed_keyless(start, end)
                else:
                    dispatch.committed(end)
                done.append((start, end, keyless))
                for at in [0] + [e for _, e, _ in done[:-1]]:
                    since = [put for put in done if put[0] >= at]
                    chained = all(a[1] == b[0] for a, b in itertools.pairwise(since))
                    want = since[0][0] == at and chained and all(k for _, _, k in since)
                    assert (keyless_to(ctrl, end) <= at) == want, (at, done)
        finally:
            dispatch.close()


async def test_keyless_batches_around_keyed_puts_leave_every_key_findable(tmp_path: str) -> None:
    """Batches of tags only (stepped over by the child) before, between and after keyed batches and
    single puts, across several CommitLog files and a restart: every key is found. The child
    catches up after each put, so each keyed put is the first thing after a keyless run it meets."""
    s = await _started(str(tmp_path))
    try:
        for rnd in range(2):
            for i in range(30):
                await s.put_messages(batch("B", [b"x" * 1000] * 4, tags="t"))
                await index_caught_up(s)
                if i % 5 == 3:
                    await s.put_messages(batch("B", [f"{rnd}k{i}-{j}".encode() for j in range(3)],
                                               properties=[f"TAGS\x01t\x02KEYS\x01{rnd}k{i}-{j}" for j in range(3)]))
                    await index_caught_up(s)
                    assert await _bodies(s, "B", f"{rnd}k{i}-1") == [f"{rnd}k{i}-1".encode()]
                if i % 5 == 1:
                    await s.put_message(message("B", f"{rnd}s{i}".encode(), tags="t", uniq=f"{rnd}U{i}"))
                    await index_caught_up(s)
                    assert await _bodies(s, "B", f"{rnd}U{i}") == [f"{rnd}s{i}".encode()]
            assert len(os.listdir(os.path.join(s.root, "commitlog"))) > 2 * (rnd + 1)
            s = await restarted(s)
            assert await _bodies(s, "B", f"{rnd}k3-0") == [f"{rnd}k3-0".encode()]
    finally:
        await s.shutdown()


def test_a_control_file_from_before_keyless_runs_still_tells_the_indexed_offset(tmp_path: str) -> None:
    with open(os.path.join(str(tmp_path), "indexdispatch"), "wb") as f:
        f.write(struct.pack(">qqqqq", 500, 400, 0, 0, 0))  # 40 bytes, as written before
    assert read_indexed_offset(str(tmp_path)) == 400


async def test_index_files_named_out_of_order_are_read_in_log_order_after_a_restart(tmp_path: str) -> None:
    """The newest IndexFile named before the one before it, as a file made in a second's first
    milliseconds was named (time.strftime read the second before, time.time the millisecond): after
    a clean restart the index resumes past what the files hold and takes new keys, and no key is
    found twice (the child re-indexed from the wrong file's end into a new one: found twice)."""
    root = str(tmp_path)
    s = await _started(root)
    try:
        for i in range(180):  # three keys each: files of 255 entries hold records 0-84, 85-169, 170-179
            await s.put_message(message("O", f"m{i}".encode(), keys=f"key{i} shared", uniq=f"U{i}"))
    finally:
        await s.shutdown()
    index_dir = os.path.join(root, "index")
    names = sorted(os.listdir(index_dir))
    assert len(names) == 3
    # Its second read a moment late: before the others' names (a shorter name of their second).
    os.rename(os.path.join(index_dir, names[2]), os.path.join(index_dir, names[0][:14]))
    s = await _started(root)
    try:
        await index_caught_up(s)
        assert await _bodies(s, "O", "key179") == [b"m179"] and await _bodies(s, "O", "U170") == [b"m170"]
        for i in range(180, 200):
            await s.put_message(message("O", f"m{i}".encode(), keys=f"key{i} shared", uniq=f"U{i}"))
        s = await restarted(s)
        for i in range(0, 200, 3):
            assert await _bodies(s, "O", f"key{i}") == [f"m{i}".encode()], i
        assert await _bodies(s, "O", "key199") == [b"m199"] and await _bodies(s, "O", "U178") == [b"m178"]
    finally:
        await s.shutdown()


def _report_indexed(root: str, offset: int) -> None:
    with open(os.path.join(root, "indexdispatch"), "r+b") as f:
        f.seek(8)  # the child's indexed offset
        f.write(struct.pack(">q", offset))


@pytest.mark.parametrize("child", [True, False])
async def test_records_indexed_past_the_reported_offset_are_indexed_once_after_a_restart(
        tmp_path: str, child: bool) -> None:
    """A child killed after writing a span's entries but before reporting them leaves the control
    file's indexed offset behind the IndexFiles. The next start indexes from there again, by a
    child or by recovery inline: every key is found once (the records below the files' end were
    skipped, the last one's keys were put again: found twice)."""
    root = str(tmp_path)
    s = await _started(root)
    offsets = []
    try:
        for i in range(30):
            result = await s.put_message(message("R", f"m{i}".encode(), keys=f"key{i} shared", uniq=f"U{i}"))
            assert result.append_result is not None
            offsets.append(result.append_result.wrote_offset)
    finally:
        await s.shutdown()
    _report_indexed(root, offsets[25])  # as a child that reported records 0-24 only left it
    s = await _started(root, messageIndexInChildProcess=child)
    try:
        await index_caught_up(s)
        for i in range(30):
            assert await _bodies(s, "R", f"key{i}") == [f"m{i}".encode()], i
            assert await _bodies(s, "R", f"U{i}") == [f"m{i}".encode()], i
    finally:
        await s.shutdown()
