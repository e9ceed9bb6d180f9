"""Index building in a child process: Java's ReputMessageService feeding the index dispatcher.

Hashing a message's keys and linking their IndexFile entries costs about a third of a put in
Python. Java does that work on its reput thread; a child process is how Python gets the same
parallelism. The parent appends, then writes how far the CommitLog is complete into a small
shared control file; the child follows, reading each record's topic and properties straight
from its own read-only mapping of the CommitLog (the page cache is shared), writes the
IndexFiles, and reports how far it has indexed and flushed. The parent reads IndexFiles
directly for queries, after waiting for the child to reach the query's moment, so a key is
findable as soon as its put has returned.

Control file (``<root>/indexdispatch``, 56 bytes, int64 big-endian): committed offset (parent),
indexed offset (child), store timestamp of the last record indexed and flushed (child), CommitLog
min offset for retention (parent), stop request (parent), and the start and end of the run of puts
known to name no key that the log ends with, if it does (parent). It outlives the processes: after
a clean stop its indexed offset tells the next start where the index ends.

Keyless runs: a batch whose entries' properties all lack the part of the names the index reads
(index_file.INDEXED_NAMES_PART; a batch's entries often carry only tags) has nothing to index,
and the child steps over such puts without reading them. The parent writes a keyless put's run
start (when the put does not continue the run), then the run's end, then the committed offset;
any other put writes only the committed offset, the way it always did. The child reads the
committed offset, then the run's end, then its start: an end equal to the committed offset was
written by the keyless put that ends the log there, so the start read after it is that run's (or
a later run's, past the child's offset), and every put between the start and the committed offset
is keyless. Any other put after the run moves the committed offset past the run's end, and the
child reads records again. A put nobody marked keyless is read: forgetting costs time, not keys.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import functools
import logging
import mmap
import os
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable

from rocketmq_py.remoting.protocol.message import (
    BLANK_MAGIC_CODE,
    BORNHOST_V6_FLAG,
    HOST_V6_FLAGS,
    MESSAGE_MAGIC_CODE,
    STOREHOSTADDRESS_V6_FLAG,
    TRANSACTION_ROLLBACK_TYPE,
    record_field_at,
    record_head,
)
from rocketmq_py.store.index_file import (
    INDEXED_NAMES_PART,
    UNIQ_KEY_PREFIX,
    IndexService,
    KeyHasher,
    record_key_hashes,
)
from rocketmq_py.store.mapped_file import DISK_FULL_ERRNOS, reserve_blocks

log = logging.getLogger("rocketmq.store")

try:
    import fcntl
except ImportError:  # Windows
    # type-ignored: Windows has no fcntl; its users check for None
    fcntl = None  # type: ignore[assignment]

# The child is POSIX-only: it holds flock on the control file and follows its parent by getppid.
# Elsewhere the store indexes in its own process (messageIndexInChildProcess is then ignored).
CHILD_SUPPORTED = fcntl is not None

CONTROL_FILE = "indexdispatch"
_SIZE = 56
_I64 = struct.Struct(">q")
_COMMITTED, _INDEXED, _FLUSHED_TS, _MIN_OFFSET, _STOP, _RUN_START, _RUN_END = 0, 8, 16, 24, 32, 40, 48
_HEAD = struct.Struct(">ii")
_I16 = struct.Struct(">h")
# By the host-length flags of a record: where its store timestamp is, and how to read it with
# the body length that follows the store host, reconsume times and prepared offset.
_MIDDLE = {flags: (record_field_at("store_timestamp", flags),
                   record_head(flags, ("store_timestamp", "body_length"), start="store_timestamp"))
           for flags in (0, BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG, HOST_V6_FLAGS)}
# The head's size by the host-length flags, and what the index reads of a record with IPv4 hosts
# (nearly every one) in one unpack.
_HEAD_SIZES = {flags: record_head(flags).size for flags in _MIDDLE}
_HEAD_V4 = _HEAD_SIZES[0]
# Where a UNIQ_KEY's name and separators stand around the KEY found in it.
_UNIQ_AT = UNIQ_KEY_PREFIX.index(INDEXED_NAMES_PART)
_UNIQ_TO = len(UNIQ_KEY_PREFIX) - _UNIQ_AT
_FIELDS_V4 = record_head(0, ("total_size", "magic_code", "sys_flag", "store_timestamp", "body_length"))


def _open_control(path: str) -> mmap.mmap:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if os.fstat(fd).st_size != _SIZE:
            os.ftruncate(fd, _SIZE)
            reserve_blocks(fd, _SIZE)  # a page the disk cannot back would be a SIGBUS
        return mmap.mmap(fd, _SIZE)
    finally:
        os.close(fd)


def wait_for_previous_child(root: str, timeout: float) -> None:
    """Wait until no child of an earlier run of this store is alive (it holds a lock on the
    control file, and exits within a millisecond or two of its parent's death)."""
    path = os.path.join(root, CONTROL_FILE)
    if fcntl is None or not os.path.exists(path):
        return
    fd = os.open(path, os.O_RDWR)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the index dispatch process of an earlier run still works on {root}") from None
                time.sleep(0.005)
    finally:
        os.close(fd)  # releases the lock


def read_indexed_offset(root: str) -> int | None:
    """How far the index was built when the store last ran with a child, or None."""
    path = os.path.join(root, CONTROL_FILE)
    try:
        with open(path, "rb") as f:
            data = f.read(_SIZE)
    except FileNotFoundError:
        return None
    # A file of 40 bytes (before keyless runs) holds the field in the same place.
    return _I64.unpack_from(data, _INDEXED)[0] if len(data) >= _INDEXED + _I64.size else None


def _not_started(offset: int) -> None:
    raise RuntimeError("the index child is not started")


class IndexDispatchProcess:
    """The parent's handle on the child that builds the index."""

    def __init__(self, root: str, commit_log_dir: str, file_size: int, hash_slot_num: int, index_num: int,
                 flush_interval_ms: int) -> None:
        self.root = root
        self._args = [sys.executable, "-m", "rocketmq_py.store.index_dispatch", "--root", root,
                      "--commitlog", commit_log_dir, "--file-size", str(file_size), "--hash-slots", str(hash_slot_num),
                      "--index-num", str(index_num), "--flush-interval", str(flush_interval_ms),
                      "--ppid", str(os.getpid())]
        self._ctrl: mmap.mmap | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        # The log's end as the put path hands it over, once per put: the control file's field
        # written by one C call (a partial of pack_into), no Python frame; set by ``start``.
        self.committed: Callable[[int], None] = _not_started
        # The keyless run the log ends with, as the parent last wrote it (see the module's doc).
        self._run_start = self._run_end = -1

    def start(self, from_offset: int, min_offset: int, indexed: int | None = None) -> None:
        """Start the child with the log committed to ``from_offset`` and indexed to ``indexed``
        (the same by default; less when recovery left the index behind the log)."""
        ctrl = self._ctrl = _open_control(os.path.join(self.root, CONTROL_FILE))
        self._run_start = self._run_end = -1
        for pos, value in ((_COMMITTED, from_offset), (_INDEXED, from_offset if indexed is None else indexed),
                           (_FLUSHED_TS, 0),
                           (_MIN_OFFSET, min_offset), (_STOP, 0), (_RUN_START, -1), (_RUN_END, -1)):
            _I64.pack_into(ctrl, pos, value)
        self.committed = functools.partial(_I64.pack_into, ctrl, _COMMITTED)
        self._spawn()

    def committed_keyless(self, start: int, end: int) -> None:
        """``committed`` for a put of [start, end) that names no key: the child steps over it."""
        ctrl = self._ctrl
        if ctrl is None:
            _not_started(end)
            return
        if start != self._run_end:  # a new run: its start goes first
            self._run_start = start
            _I64.pack_into(ctrl, _RUN_START, start)
        self._run_end = end
        _I64.pack_into(ctrl, _RUN_END, end)
        _I64.pack_into(ctrl, _COMMITTED, end)

    def kill(self) -> None:
        """What the death of the store's process does to the child, for in-process crash tests."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None
        self.close()

    def _spawn(self) -> None:
        # The child's directory must import this package whatever the daemon's working directory.
        pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [pkg_root, os.environ.get("PYTHONPATH")]))}
        self._proc = subprocess.Popen(self._args, env=env, stdin=subprocess.DEVNULL)

    def _get(self, pos: int) -> int:
        assert self._ctrl is not None
        value: int = _I64.unpack_from(self._ctrl, pos)[0]
        return value

    @property
    def indexed_offset(self) -> int:
        return self._get(_INDEXED)

    @property
    def flushed_timestamp(self) -> int:
        return self._get(_FLUSHED_TS)

    def set_min_offset(self, offset: int) -> None:
        assert self._ctrl is not None
        _I64.pack_into(self._ctrl, _MIN_OFFSET, offset)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def wait_indexed(self, timeout: float) -> bool:
        """Block until everything committed so far is indexed (queries want their own writes)."""
        target, deadline = self._get(_COMMITTED), time.monotonic() + timeout
        while (done := self._caught_up(target, deadline)) is None:
            time.sleep(0.0005)
        return done

    async def wait_indexed_async(self, timeout: float) -> bool:
        """``wait_indexed`` for the event loop: the child may lag a busy broker by
        far more than a millisecond, and other clients must not wait with the query."""
        target, deadline = self._get(_COMMITTED), time.monotonic() + timeout
        # Polled: the offset is written by another process into shared memory, no Event to await.
        while (done := self._caught_up(target, deadline)) is None:  # noqa: ASYNC110
            await asyncio.sleep(0.0005)
        return done

    def _caught_up(self, target: int, deadline: float) -> bool | None:
        """True once ``target`` is indexed, False when it never will be in time, else None."""
        if self._get(_INDEXED) >= target:
            return True
        if not self.alive() or time.monotonic() > deadline:
            return False
        return None

    def ensure_running(self) -> None:
        """Restart a child that died (it resumes from its last reported offset)."""
        if self._proc is not None and self._proc.poll() is not None:
            log.error("index dispatch process exited with %s; restarting it from offset %d",
                      self._proc.returncode, self.indexed_offset)
            self.restarts += 1
            self._spawn()

    def stop(self, timeout: float) -> bool:
        """Ask the child to index what is committed, flush and exit; True when it did."""
        if self._proc is None or self._ctrl is None:
            return True
        _I64.pack_into(self._ctrl, _STOP, 1)
        try:
            clean = self._proc.wait(timeout) == 0
        except subprocess.TimeoutExpired:
            log.error("index dispatch process did not stop within %.0f s; killed", timeout)
            self._proc.kill()
            self._proc.wait()
            clean = False
        self._proc = None
        return clean

    def close(self) -> None:
        if self._ctrl is not None:
            self.committed = _not_started
            self._ctrl.close()
            self._ctrl = None


# -- the child ------------------------------------------------------------------------------


class _CommitLogReader:
    """Read-only mappings of CommitLog files, opened as the child reaches them."""

    def __init__(self, directory: str, file_size: int) -> None:
        self.directory = directory
        self.file_size = file_size
        self.maps: dict[int, mmap.mmap] = {}
        self.key_hashers: dict[bytes, KeyHasher] = {}  # by a topic's bytes as stored

    def get(self, file_offset: int) -> mmap.mmap:
        mm = self.maps.get(file_offset)
        if mm is None:
            with open(os.path.join(self.directory, f"{file_offset:020d}"), "rb") as f:
                mm = self.maps[file_offset] = mmap.mmap(f.fileno(), self.file_size, access=mmap.ACCESS_READ)
        return mm

    def drop_below(self, offset: int) -> None:
        for start in [s for s in self.maps if s + self.file_size <= offset]:
            with contextlib.suppress(BufferError):
                self.maps.pop(start).close()


_NO_TOPIC = KeyHasher(b"\x00")  # before the first record: no topic is named so (and its hash would be right)


def index_records(reader: _CommitLogReader, index: IndexService, offset: int, end: int) -> tuple[int, int]:
    """Index the records in [offset, end), at most 4 MiB of them (so a child catching up still
    looks at its parent and its stop flag often); returns the new offset and the last store time.

    Keys are read and hashed from the record's bytes, and the entries of the whole span go to
    the IndexFile in one call: this child is what bounds sustained put rates. A record is read
    with one unpack (IPv4 hosts; again by its own layout otherwise), and one whose properties name
    no key (INDEXED_NAMES_PART absent: a batch's entries often carry only tags) costs no more than
    that, its properties' slice and one search."""
    file_size = reader.file_size
    hashers = reader.key_hashers
    hashes: list[int] = []
    phys: list[int] = []
    stamps: list[int] = []
    append_hash, append_phy, append_stamp = hashes.append, phys.append, stamps.append
    hasher = _NO_TOPIC
    last_ts = 0
    end = min(end, offset + (4 << 20))
    while offset < end:
        file_offset = offset - offset % file_size
        mm = reader.get(file_offset)
        pos = offset - file_offset
        limit = min(end - file_offset, file_size)
        while pos < limit:
            try:
                total, magic, sys_flag, store_ts, body_len = _FIELDS_V4.unpack_from(mm, pos)
            except struct.error:  # a BLANK too near the file's end for the head
                total, magic = _HEAD.unpack_from(mm, pos)
            if magic != MESSAGE_MAGIC_CODE or total <= 0:
                if magic == BLANK_MAGIC_CODE:
                    pos = file_size
                    break
                raise ValueError(f"no record at committed offset {file_offset + pos} (magic {magic:#x}, size {total})")
            hosts = sys_flag & HOST_V6_FLAGS
            if hosts:
                at, middle = _MIDDLE[hosts]
                store_ts, body_len = middle.unpack_from(mm, pos + at)
                p = pos + _HEAD_SIZES[hosts] + body_len + 1
            else:
                p = pos + _HEAD_V4 + body_len + 1
            p_end = p + mm[p - 1]
            (props_len,) = _I16.unpack_from(mm, p_end)
            props = mm[p_end + 2:p_end + 2 + props_len]
            k = props.find(INDEXED_NAMES_PART)
            if k >= 0 and sys_flag & TRANSACTION_ROLLBACK_TYPE != TRANSACTION_ROLLBACK_TYPE:
                topic = mm[p:p_end]
                if topic != hasher.topic:  # the topic of the record before, most often
                    hasher = hashers.get(topic) or hashers.setdefault(topic, KeyHasher(topic))
                # A lone UNIQ_KEY after another property (a producer's batches, the SDK's sends
                # without keys): its name holds the properties' only KEY, so no KEYS and no second
                # UNIQ_KEY; its value is hashed by its hasher at once.
                if k >= _UNIQ_AT and props.rfind(INDEXED_NAMES_PART) == k and \
                        props[k - _UNIQ_AT:k + _UNIQ_TO] == UNIQ_KEY_PREFIX:
                    k += _UNIQ_TO
                    j = props.find(b"\x02", k)
                    key = props[k:j] if j >= 0 else props[k:]
                    if key:
                        append_hash(hasher.hash(key))
                        append_phy(file_offset + pos)
                        append_stamp(store_ts)
                else:
                    found = record_key_hashes(hasher.prefix, props)
                    if found:
                        hashes += found
                        phys += [file_offset + pos] * len(found)
                        stamps += [store_ts] * len(found)
            last_ts = store_ts
            pos += total
        offset = file_offset + pos
    if hashes:
        index.put_entries(hashes, phys, stamps)
    return offset, last_ts


def keyless_to(ctrl: mmap.mmap, committed: int) -> int:
    """Where the keyless run ending at ``committed`` (read from the control file just before)
    starts; beyond any offset when the log does not end with one (the module's doc says why the
    order of these reads makes that safe)."""
    if _I64.unpack_from(ctrl, _RUN_END)[0] != committed:
        return 1 << 62
    start: int = _I64.unpack_from(ctrl, _RUN_START)[0]
    return start if start >= 0 else 1 << 62


def run_child(ns: argparse.Namespace) -> int:
    path = os.path.join(ns.root, CONTROL_FILE)
    lock_fd = os.open(path, os.O_RDWR)
    assert fcntl is not None, "the index child runs only where CHILD_SUPPORTED"
    fcntl.flock(lock_fd, fcntl.LOCK_EX)  # one child per store, held until this process ends
    ctrl = _open_control(path)
    index = IndexService(os.path.join(ns.root, "index"), ns.hash_slots, ns.index_num)
    index.load(True, 0)
    reader = _CommitLogReader(ns.commitlog, ns.file_size)
    offset = _I64.unpack_from(ctrl, _INDEXED)[0]
    last_ts = 0
    flush_every = ns.flush_interval / 1000
    last_flush = time.monotonic()
    while True:
        committed = _I64.unpack_from(ctrl, _COMMITTED)[0]
        if os.getppid() != ns.ppid:
            return 3  # the store died: nothing more is flushed, its recovery rebuilds from the log
        if offset < committed:
            # Records retention already deleted are not there to index.
            offset = max(offset, _I64.unpack_from(ctrl, _MIN_OFFSET)[0])
            try:
                if keyless_to(ctrl, committed) <= offset:
                    offset, ts = committed, 0  # every put since names no key
                else:
                    offset, ts = index_records(reader, index, offset, committed)
            except OSError as exc:
                if exc.errno not in DISK_FULL_ERRNOS and exc.errno not in (errno.EMFILE, errno.ENFILE):
                    raise
                # No new IndexFile: wait for room and index the same records again (put_entries
                # skips what is already in), rather than die and be restarted every second.
                log.error("cannot create an index file (%s); retrying from offset %d in 1 s", exc, offset)
                time.sleep(1.0)
                continue
            last_ts = ts or last_ts
            _I64.pack_into(ctrl, _INDEXED, offset)
            # Files behind the offset are never read again: their mappings (a descriptor each)
            # are dropped as the child moves on.
            reader.drop_below(offset)
        elif _I64.unpack_from(ctrl, _STOP)[0]:
            break
        else:
            time.sleep(0.001)
        now = time.monotonic()
        if now - last_flush >= flush_every:
            last_flush = now
            index.flush()
            _I64.pack_into(ctrl, _FLUSHED_TS, last_ts)
            min_offset = _I64.unpack_from(ctrl, _MIN_OFFSET)[0]
            index.delete_expired(min_offset)
            reader.drop_below(min_offset)
    index.flush()
    _I64.pack_into(ctrl, _FLUSHED_TS, last_ts)
    index.close()
    ctrl.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="rocketmq-py index dispatch child (started by the store)")
    parser.add_argument("--root", required=True)
    parser.add_argument("--commitlog", required=True)
    parser.add_argument("--file-size", type=int, required=True)
    parser.add_argument("--hash-slots", type=int, required=True)
    parser.add_argument("--index-num", type=int, required=True)
    parser.add_argument("--flush-interval", type=int, default=1000)
    parser.add_argument("--ppid", type=int, required=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s [IndexDispatch] %(message)s")
    # A Ctrl-C or a SIGTERM to the daemon's whole process group is the parent's to handle: it
    # tells this process to finish through the control file (and its death ends this one too).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # Normal priority, as Java's reput thread. At nice 19 (dc9024e) the index fell behind a busy
    # process: bench/store_append.py's batches, timed until the index catches up, went from
    # 0.92-0.97 of the bare loop to 0.74-0.81, for batches in broker_send 0-5% faster.
    try:
        return run_child(parser.parse_args(argv))
    except Exception:
        log.exception("index dispatch failed")
        return 1


if __name__ == "__main__":
    sys.exit(main())
