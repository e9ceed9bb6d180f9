"""Master/slave replication (store/ha) between real daemons, and the HA protocol spoken by hand.

Frames are built here from docs/ha.md's layout -- 8-byte big-endian offsets from the slave; from
the master an 8-byte offset, a 4-byte size and that many CommitLog bytes -- not with the
project's own codec, so these tests hold both ends to the wire format Java 4.9 speaks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import struct

from rocketmq_py.client import Admin, Message, Producer, SendStatus
from rocketmq_py.client.push_consumer import ConsumeConcurrentlyStatus, PushConsumer
from rocketmq_py.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rocketmq_py.remoting.protocol.heartbeat import ConsumeFromWhere
from rocketmq_py.remoting.protocol.message import MessageExt, decode_offset_msg_id, decode_records
from rocketmq_py.remoting.protocol.route import KVTable
from tests.integration.broker_client import (
    call,
    commit_offset,
    create_topic,
    pull_request,
    send_request,
    wait_for_route,
)
from tests.integration.cli import run_cli, run_cli_async
from tests.integration.daemons import Daemon, DaemonSet
from tests.integration.ha_cluster import HA_OPTIONS, ha_addr, log_bytes, log_files, log_text, master, record_at, slave
from tests.waiting import wait_for_async, wait_until

FILE_SIZE = 256 * 1024  # small CommitLog files, so the stream crosses file boundaries


async def max_phy_offset(addr: str) -> int:
    """The broker's CommitLog max offset, from GET_BROKER_RUNTIME_INFO."""
    client = RemotingClient()
    try:
        r = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), 5)
        return int(KVTable.decode(r.body or b"{}").table["commitLogMaxOffset"])
    finally:
        await client.close()


async def send_some(ns: str, topic: str, count: int, size: int = 300) -> list[tuple[int, bytes]]:
    """``count`` sends; each one's CommitLog offset and body."""
    out = []
    async with Producer("pg_ha", ns) as producer:
        for i in range(count):
            body = f"{i:06d}".encode() * (size // 6)
            result = await producer.send(Message(topic, body))
            assert result.send_status == SendStatus.SEND_OK
            out.append((decode_offset_msg_id(result.offset_msg_id)[1], body))
    return out


async def connected(master_daemon: Daemon, count: int = 1) -> bool:
    """The master logged its ``count``-th slave's request offset (bounded wait)."""
    return await wait_until(lambda: log_text(master_daemon).count("request offset") >= count, 20)


async def read_exactly(reader: asyncio.StreamReader, n: int) -> bytes:
    return await asyncio.wait_for(reader.readexactly(n), 10)


async def test_slave_replicates_the_master_byte_for_byte(daemons: DaemonSet) -> None:
    ns = daemons.namesrv().addr
    m = master(daemons, ns, "ASYNC_MASTER", f"mappedFileSizeCommitLog={FILE_SIZE}")
    s = slave(daemons, ns, f"mappedFileSizeCommitLog={FILE_SIZE}")
    assert await connected(m)
    sent = await send_some(ns, "HaCopy", 1200)
    master_end = await max_phy_offset(m.addr)
    assert master_end > 2 * FILE_SIZE
    assert await wait_for_async(lambda: _at(s.addr, master_end), 20)
    # A slave that started empty is given the master's files it still has to follow from the
    # beginning of the master's last file at connection (Java's rule): here the first file.
    # (Files past the end may exist already: the next file is made ahead, on both.)
    holding = [first for first in log_files(m) if first < master_end]
    assert [first for first in log_files(s) if first < master_end] == holding
    for first in holding:
        end = min(first + FILE_SIZE, master_end)
        assert log_bytes(s, first, end) == log_bytes(m, first, end)
    # Its queues are built from its own log: a pull from the slave returns the messages
    # (once SlaveSynchronize copied the topic's config from the master).
    client = RemotingClient()
    try:
        async def topic_known() -> bool:
            r = await client.invoke(s.addr, pull_request("g_ha", "HaCopy", 0, 0, max_nums=1), 5)
            return r.code != ResponseCode.TOPIC_NOT_EXIST

        assert await wait_for_async(topic_known, 20)
        bodies = []
        for qid in range(4):
            offset = 0
            while True:
                r = await client.invoke(s.addr, pull_request("g_ha", "HaCopy", qid, offset, max_nums=32), 5)
                if r.code != ResponseCode.SUCCESS:
                    break
                msgs = list(decode_records(r.body or b""))
                bodies += [x.body for x in msgs]
                offset = msgs[-1].queue_offset + 1
        assert sorted(bodies) == sorted(b for _, b in sent)
    finally:
        await client.close()


async def _at(addr: str, offset: int) -> bool:
    return await max_phy_offset(addr) >= offset


async def test_hand_built_slave_against_our_master(daemons: DaemonSet) -> None:
    ns = daemons.namesrv().addr
    m = master(daemons, ns, "ASYNC_MASTER", f"mappedFileSizeCommitLog={FILE_SIZE}")
    await send_some(ns, "HaWire", 1000)
    end = await max_phy_offset(m.addr)
    last_file_start = end - end % FILE_SIZE
    assert last_file_start > 0
    host, port = ha_addr(m)
    reader, writer = await asyncio.open_connection(host, port)
    try:
        # A slave with nothing reports 0: the master starts at the beginning of its last file.
        writer.write(struct.pack(">q", 0))
        received = bytearray()
        at = last_file_start
        while at < end:
            offset, size = struct.unpack(">qi", await read_exactly(reader, 12))
            assert offset == at and 0 <= size <= 32 * 1024
            received += await read_exactly(reader, size)
            at += size
        assert bytes(received) == log_bytes(m, last_file_start, end)
        # Reporting where it is keeps the connection; the master sends heartbeats at its end.
        writer.write(struct.pack(">q", end))
        offset, size = struct.unpack(">qi", await read_exactly(reader, 12))
        assert (offset, size) == (end, 0)
        # A slave silent for haHousekeepingInterval (5 s here) is dropped: only heartbeats, then
        # the end of the stream.
        started = asyncio.get_running_loop().time()
        rest = await asyncio.wait_for(reader.read(), 20)
        assert asyncio.get_running_loop().time() - started >= 3
        assert len(rest) % 12 == 0 and all(struct.unpack_from(">qi", rest, i) == (end, 0)
                                           for i in range(0, len(rest), 12))
    finally:
        writer.close()
    # A slave claiming more than the master has is refused: the master closes the connection.
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(struct.pack(">q", end + 1000))
        assert await asyncio.wait_for(reader.read(), 10) == b""
    finally:
        writer.close()
    assert "greater than local commitLog offset" in log_text(m)


async def test_hand_built_master_against_our_slave(daemons: DaemonSet) -> None:
    ns = daemons.namesrv().addr
    # Real records to replicate: another broker's log, sent by this test's fake master.
    source = daemons.broker(ns, "brokerName=broker-src", name="src")
    sent = await send_some(ns, "HaFeed", 60, size=500)
    end = await max_phy_offset(source.addr)
    records = log_bytes(source, 0, end)
    connections: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()

    accepted: list[asyncio.StreamWriter] = []

    async def accept(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        accepted.append(w)
        await connections.put((r, w))

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    # This master sends no heartbeats while the test looks at the slave: no housekeeping here.
    s = slave(daemons, ns, f"haMasterAddress=127.0.0.1:{port}", "haHousekeepingInterval=120000",
              broker_name="broker-other")
    try:
        reader, writer = await asyncio.wait_for(connections.get(), 15)
        # The slave reports its max offset, 0, at once.
        assert struct.unpack(">q", await read_exactly(reader, 8))[0] == 0
        writer.write(struct.pack(">qi", 0, 0))  # a heartbeat
        # Frames cut anywhere, records split across them: the slave reassembles.
        cut, at = 777, 0
        while at < end:
            size = min(cut, end - at)
            writer.write(struct.pack(">qi", at, size) + records[at:at + size])
            at += size
            cut = 100 + (cut * 7) % 3000
        await writer.drain()
        seen = 0

        async def acked() -> bool:
            nonlocal seen
            data = await reader.read(8 * 64)
            if len(data) >= 8:
                seen = struct.unpack(">q", data[len(data) - len(data) % 8 - 8:len(data) - len(data) % 8])[0]
            return seen == end

        assert await wait_for_async(acked, 15)
        assert log_bytes(s, 0, end) == records
        client = RemotingClient()
        try:
            # This master has no remoting port to copy the topic's config from: given by hand.
            await create_topic(client, s.addr, "HaFeed", queues=4)
            pulled = []
            for qid in range(4):
                r = await client.invoke(s.addr, pull_request("g_feed", "HaFeed", qid, 0, max_nums=32), 5)
                pulled += [x.body for x in decode_records(r.body or b"")] if r.code == ResponseCode.SUCCESS else []
            assert sorted(pulled) == sorted(b for _, b in sent)
        finally:
            await client.close()
        # A frame at any other offset than the slave's end: refused, the slave drops the
        # connection and comes back reporting its own end.
        writer.write(struct.pack(">qi", end + 8, 4) + b"\0\0\0\0")
        await writer.drain()
        # read() returns at end of stream only: what came before it is the slave's reports.
        rest = await asyncio.wait_for(reader.read(), 10)
        assert len(rest) % 8 == 0 and {struct.unpack_from(">q", rest, i)[0] for i in range(0, len(rest), 8)} <= {end}
        reader2, writer2 = await asyncio.wait_for(connections.get(), 15)
        assert struct.unpack(">q", await read_exactly(reader2, 8))[0] == end
        assert log_bytes(s, 0, end + 64)[:end] == records
        assert "master pushed offset not equal the max phy offset in slave" in log_text(s)
        # Right offset, wrong history: a whole, valid record that names another offset (the
        # log's first, sent again at its end). The slave cuts it off and stops replicating.
        first_size = struct.unpack_from(">i", records, 0)[0]
        writer2.write(struct.pack(">qi", end, first_size) + records[:first_size])
        await writer2.drain()
        assert await wait_until(lambda: "replication stopped" in log_text(s), 15)
        assert "does not continue this log" in log_text(s)
        assert await max_phy_offset(s.addr) == end
        assert log_bytes(s, end, end + first_size) == bytes(first_size)
    finally:
        server.close()
        for w in accepted:
            w.close()
            with contextlib.suppress(OSError, ConnectionError):
                await w.wait_closed()
        await server.wait_closed()


async def test_slave_refuses_sends_and_serves_reads(daemons: DaemonSet) -> None:
    ns = daemons.namesrv().addr
    m = master(daemons, ns)
    s = slave(daemons, ns)
    client = RemotingClient()
    admin = Admin(ns)
    await admin.start()
    try:
        await create_topic(client, m.addr, "HaRefuse", queues=1)
        await wait_for_route(ns, "HaRefuse")
        sent = await send_some(ns, "HaRefuse", 5)
        r = await client.invoke(s.addr, send_request("HaRefuse", b"to the slave", queue_id=0), 5)
        assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert "messages are put to the slave" in (r.remark or "")

        async def routed() -> bool:
            route = await admin.examine_topic_route_info("HaRefuse")
            addrs = {b.brokerName: b.brokerAddrs for b in route.brokerDatas}
            return addrs.get("broker-ha") == {0: m.addr, 1: s.addr}

        assert await wait_for_async(routed, 20)
        end = await max_phy_offset(m.addr)
        assert await wait_for_async(lambda: _at(s.addr, end), 20)
        r = await client.invoke(s.addr, pull_request("g_refuse", "HaRefuse", 0, 0, max_nums=32), 5)
        assert r.code == ResponseCode.SUCCESS
        assert [x.body for x in decode_records(r.body or b"")][:len(sent)] == [b for _, b in sent]
        # Queries and admin reads too: the slave indexed the keys from its own copy.
        r = await client.invoke(m.addr, send_request("HaRefuse", b"keyed", keys="ha-key-1", queue_id=0), 5)
        assert r.code == ResponseCode.SUCCESS
        end = await max_phy_offset(m.addr)
        assert await wait_for_async(lambda: _at(s.addr, end), 20)
        query = {"topic": "HaRefuse", "key": "ha-key-1", "maxNum": "8", "beginTimestamp": "0",
                 "endTimestamp": str(2**62)}
        r = await call(client, s.addr, RequestCode.QUERY_MESSAGE, query)
        assert r.code == ResponseCode.SUCCESS and [x.body for x in decode_records(r.body or b"")] == [b"keyed"]
        r = await call(client, s.addr, RequestCode.GET_MAX_OFFSET, {"topic": "HaRefuse", "queueId": "0"})
        assert (r.ext_fields or {}).get("offset") == str(len(sent) + 1)
    finally:
        await admin.shutdown()
        await client.close()



async def test_sync_master_answers_only_what_the_slave_has(daemons: DaemonSet) -> None:
    ns = daemons.namesrv().addr
    m = master(daemons, ns, "SYNC_MASTER")
    client = RemotingClient()
    try:
        await create_topic(client, m.addr, "HaSync", queues=4)
        # No slave yet: stored, but answered SLAVE_NOT_AVAILABLE.
        r = await client.invoke(m.addr, send_request("HaSync", b"alone", queue_id=0), 5)
        assert r.code == ResponseCode.SLAVE_NOT_AVAILABLE
    finally:
        await client.close()
    s = slave(daemons, ns)
    await wait_for_route(ns, "HaSync")
    results: list[tuple[SendStatus, int]] = []
    async with Producer("pg_ha_sync", ns) as producer:
        async def until_slave_ok() -> bool:
            result = await producer.send(Message("HaSync", b"probe"))
            return result.send_status == SendStatus.SEND_OK

        assert await wait_for_async(until_slave_ok, 20)
        in_flight = asyncio.Semaphore(64)
        killed = asyncio.Event()

        async def one(i: int) -> None:
            async with in_flight:
                if killed.is_set():
                    return
                try:
                    result = await producer.send(Message("HaSync", f"sync-{i:05d}".encode() * 20), timeout=5)
                except Exception:  # the master died under it: not acknowledged, nothing promised
                    return
                results.append((result.send_status, decode_offset_msg_id(result.offset_msg_id)[1]))

        async def kill_midway() -> None:
            await wait_until(lambda: len(results) >= 1500, 60)
            m.kill()
            killed.set()

        await asyncio.wait_for(asyncio.gather(kill_midway(), *(one(i) for i in range(6000))), 120)
    acked = [offset for status, offset in results if status == SendStatus.SEND_OK]
    assert len(acked) >= 1500
    # Every message acknowledged SEND_OK is on the slave, byte for byte at the same offset.
    missing = [o for o in acked if not record_at(s, o) or record_at(s, o) != record_at(m, o)]
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged messages not on the slave"
    assert s.alive()


async def test_async_slave_restarted_resumes_from_its_own_offset(daemons: DaemonSet) -> None:
    ns = daemons.namesrv().addr
    m = master(daemons, ns, "ASYNC_MASTER", f"mappedFileSizeCommitLog={FILE_SIZE}")
    s = slave(daemons, ns, f"mappedFileSizeCommitLog={FILE_SIZE}")
    assert await connected(m)
    async with Producer("pg_ha_async", ns) as producer:
        sent = 0

        async def send(count: int) -> None:
            nonlocal sent
            for _ in range(count):
                result = await producer.send(Message("HaAsync", f"a-{sent:05d}".encode() * 30))
                assert result.send_status == SendStatus.SEND_OK
                sent += 1

        await send(300)
        s.kill()  # mid-stream: whatever it had half-received is cut at its recovery
        await send(600)
        s2 = daemons.broker(ns, *_slave_options(), name="ha-s")
        assert s2.home == s.home
        await send(300)
        end = await max_phy_offset(m.addr)
        assert await wait_for_async(lambda: _at(s2.addr, end), 30)
        # Identical logs of the same length: nothing the slave had was received twice.
        assert await max_phy_offset(s2.addr) == end
        for first in [f for f in log_files(m) if f < end]:
            stop = min(first + FILE_SIZE, end)
            assert log_bytes(s2, first, stop) == log_bytes(m, first, stop)
        # The restarted slave asked for the stream from where its own log ended.
        requests = re.findall(r"request offset (\d+)", log_text(m))
        assert len(requests) >= 2 and int(requests[-1]) > 0


def _slave_options() -> tuple[str, ...]:
    return ("brokerRole=SLAVE", "brokerId=1", "brokerName=broker-ha", *HA_OPTIONS,
            f"mappedFileSizeCommitLog={FILE_SIZE}")


async def test_consumers_read_from_the_slave_while_the_master_is_down(daemons: DaemonSet) -> None:
    ns = daemons.namesrv().addr
    m = master(daemons, ns, "ASYNC_MASTER")
    s = slave(daemons, ns)
    assert await connected(m)
    await send_some(ns, "HaFail", 300, size=60)
    end = await max_phy_offset(m.addr)
    assert await wait_for_async(lambda: _at(s.addr, end), 20)
    seen: list[int] = []
    gate = asyncio.Event()

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        for msg in msgs:
            if len(seen) >= 100:
                await gate.wait()
            seen.append(int(msg.body[:6]))
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("cg_ha_fail", ns, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                            auto_commit_interval=0.2, consume_concurrency=1)
    consumer.config.poll_name_server_interval = 0.5
    consumer.subscribe("HaFail")
    consumer.register_message_listener(listener)
    async with consumer:
        assert await wait_until(lambda: len(seen) >= 100, 20)
        m.kill()
        gate.set()
        # Nothing lost: every message is consumed, from the slave once the master is gone.
        assert await wait_until(lambda: set(seen) >= set(range(300)), 30), f"{len(set(seen))} of 300"
        duplicates = len(seen) - len(set(seen))
        print(f"consumed {len(seen)}, duplicates {duplicates}")
        # The master comes back: the slave catches up from it, and consumers read from it again.
        m2 = daemons.broker(ns, "brokerRole=ASYNC_MASTER", "brokerName=broker-ha", *HA_OPTIONS, name="ha-m")
        assert await connected(m2, 2)
        await send_some(ns, "HaFail", 20, size=60)
        assert await wait_until(lambda: set(seen) >= set(range(300)) and len(seen) >= 320, 20)

        async def master_served() -> bool:
            client = RemotingClient()
            try:
                r = await client.invoke(m2.addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), 5)
                return int(KVTable.decode(r.body or b"{}").table["msgGetTotalTodayNow"]) > 0
            finally:
                await client.close()

        assert await wait_for_async(master_served, 20)
        end2 = await max_phy_offset(m2.addr)
        assert await wait_for_async(lambda: _at(s.addr, end2), 20)


async def test_slave_restarted_as_master_keeps_every_message(daemons: DaemonSet) -> None:
    ns = daemons.namesrv().addr
    m = master(daemons, ns, "SYNC_MASTER")
    s = slave(daemons, ns)
    assert await connected(m)
    sent = await send_some(ns, "HaSwitch", 200, size=90)
    end = await max_phy_offset(m.addr)
    assert await wait_for_async(lambda: _at(s.addr, end), 20)
    # The slave copies the topic's config, consumer offsets and subscription groups from its
    # master (SlaveSynchronize) before the switch.
    client = RemotingClient()
    try:
        await commit_offset(client, m.addr, "g_switch_sync", "HaSwitch", 0, 7)
        r = await call(client, m.addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                       body=b'{"groupName":"g_only_on_master","retryMaxTimes":5}')
        assert r.code == ResponseCode.SUCCESS, r.remark

        async def synced() -> bool:
            r = await call(client, s.addr, RequestCode.QUERY_CONSUMER_OFFSET,
                           {"consumerGroup": "g_switch_sync", "topic": "HaSwitch", "queueId": "0"})
            return r.code == ResponseCode.SUCCESS and (r.ext_fields or {}).get("offset") == "7"

        assert await wait_for_async(synced, 30)
        assert await wait_until(lambda: "Update slave topic config from master" in log_text(s), 20)
        assert await wait_until(lambda: "Update slave Subscription Group from master" in log_text(s), 20)
    finally:
        await client.close()
    m.stop()
    s.stop()
    # Manual switch-over, as in 4.9: the slave's store started as brokerId 0.
    promoted = daemons.broker(ns, "brokerRole=ASYNC_MASTER", "brokerName=broker-ha", *HA_OPTIONS, name="ha-s")
    assert promoted.home == s.home
    client = RemotingClient()
    try:
        pulled = []
        for qid in range(4):
            offset = 0
            while True:
                r = await client.invoke(promoted.addr, pull_request("g_switch", "HaSwitch", qid, offset), 5)
                if r.code != ResponseCode.SUCCESS:
                    break
                msgs = list(decode_records(r.body or b""))
                pulled += [x.body for x in msgs]
                offset = msgs[-1].queue_offset + 1
        assert sorted(pulled) == sorted(b for _, b in sent)
        # The copied offsets and groups are its own now.
        r = await call(client, promoted.addr, RequestCode.QUERY_CONSUMER_OFFSET,
                       {"consumerGroup": "g_switch_sync", "topic": "HaSwitch", "queueId": "0"})
        assert (r.ext_fields or {}).get("offset") == "7"
        r = await call(client, promoted.addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        assert b"g_only_on_master" in (r.body or b"")
        # And it takes sends as the master now.
        r = await client.invoke(promoted.addr, send_request("HaSwitch", b"after the switch", queue_id=0), 5)
        assert r.code == ResponseCode.SUCCESS
    finally:
        await client.close()


def test_mqcluster_starts_masters_with_their_slaves(tmp_path: str) -> None:
    home = os.path.join(str(tmp_path), "cluster")
    try:
        up = run_cli("mqcluster", "up", "--home", home, "--free-ports", "--topology", "2m-2s-async", "--json"
                     ).ok().json()
        assert set(up["services"]) == {"namesrv", "broker-a", "broker-a-s", "broker-b", "broker-b-s"}
        brokers = run_cli("mqadmin", "clusterList", "--json", "-n", up["namesrvAddr"]).ok().json()
        ids = sorted((r["brokerName"], int(r["brokerId"])) for r in brokers)
        assert ids == [("broker-a", 0), ("broker-a", 1), ("broker-b", 0), ("broker-b", 1)]
        assert run_cli("mqcluster", "status", "--home", home).ok()
        run_cli("mqcluster", "up", "--home", home, "--topology", "3m").failed_with_one_line("unknown topology")
    finally:
        run_cli("mqcluster", "down", "--home", home)


async def test_slave_ahead_of_its_master_stops_and_says_so(daemons: DaemonSet) -> None:
    ns = daemons.namesrv().addr
    # A store with messages, then made the slave of a new, empty master of another broker name.
    old = daemons.broker(ns, "brokerName=broker-old", *HA_OPTIONS, name="ha-old")
    await send_some(ns, "HaAhead", 30)
    ahead = await max_phy_offset(old.addr)
    old.stop()
    m = master(daemons, ns, "ASYNC_MASTER", broker_name="broker-new")
    host, port = ha_addr(m)
    s = daemons.broker(ns, "brokerRole=SLAVE", "brokerId=1", "brokerName=broker-new", *HA_OPTIONS,
                       f"haMasterAddress={host}:{port}", name="ha-old")
    assert await wait_until(lambda: "replication stopped" in log_text(s), 30)
    assert "greater than local commitLog offset" in log_text(m)
    assert "log is ahead of the master's" in log_text(s)
    # Its log is left as it was: nothing merged, nothing cut.
    assert await max_phy_offset(s.addr) == ahead
    assert s.alive()


async def test_sync_master_with_sync_flush_and_a_stalled_slave(daemons: DaemonSet) -> None:
    ns = daemons.namesrv().addr
    m = master(daemons, ns, "SYNC_MASTER", "flushDiskType=SYNC_FLUSH", "slaveTimeout=1000")
    s = slave(daemons, ns)
    assert await connected(m)
    client = RemotingClient()
    try:
        await create_topic(client, m.addr, "HaFlush", queues=4)

        async def send(i: int) -> int:
            r = await client.invoke(m.addr, send_request("HaFlush", f"f-{i}".encode() * 50, queue_id=i % 4), 10)
            return r.code

        async def ok_once() -> bool:
            return await send(-1) == ResponseCode.SUCCESS

        assert await wait_for_async(ok_once, 20)
        # Flushed and on the slave: 64 in flight, every one SUCCESS.
        codes = await asyncio.gather(*(send(i) for i in range(64)))
        assert set(codes) == {ResponseCode.SUCCESS}
        # A slave that stops acknowledging (SIGSTOP: its connection stays open): the sends are
        # stored and flushed, and answered FLUSH_SLAVE_TIMEOUT after slaveTimeout.
        caught_up = await max_phy_offset(m.addr)

        async def no_gap() -> bool:
            return (await runtime_info(m.addr))["slaveFallBehindMuch"] == "0"

        assert await wait_for_async(no_gap, 20)
        os.kill(s.proc.pid, signal.SIGSTOP)
        try:
            started = asyncio.get_running_loop().time()
            codes = await asyncio.gather(*(send(i) for i in range(8)))
            assert set(codes) == {ResponseCode.FLUSH_SLAVE_TIMEOUT}
            assert asyncio.get_running_loop().time() - started >= 0.9
            # The runtime info reports the stalled slave's gap: exactly the bytes stored since.
            info = await runtime_info(m.addr)
            stored = int(info["commitLogMaxOffset"]) - caught_up
            assert stored > 0 and info["slaveFallBehindMuch"] == str(stored)
            (conn,) = json.loads(info["haConnectionInfo"])
            assert (conn["slaveAckOffset"], conn["diff"]) == (caught_up, stored)
        finally:
            os.kill(s.proc.pid, signal.SIGCONT)
        assert await wait_for_async(ok_once, 20)
        end = await max_phy_offset(m.addr)
        assert await wait_for_async(lambda: _at(s.addr, end), 20)
    finally:
        await client.close()


async def runtime_info(addr: str) -> dict[str, str]:
    """The broker's GET_BROKER_RUNTIME_INFO table."""
    client = RemotingClient()
    try:
        r = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), 5)
        return KVTable.decode(r.body or b"{}").table
    finally:
        await client.close()


async def test_async_slave_lag_stays_bounded_under_steady_load(daemons: DaemonSet) -> None:
    """The lag as operators see it: the HA keys of each side's runtime info, sampled under a
    steady load, bounded, and 0 on both sides once the load stops; clusterList and brokerStatus
    show the same figures."""
    ns = daemons.namesrv().addr
    m = master(daemons, ns, "ASYNC_MASTER")
    s = slave(daemons, ns)
    assert await connected(m)
    # The slave learns its master's remoting address from its registration: only then does it
    # know how far behind it is.
    assert await wait_for_async(lambda: _slave_knows_its_master(s.addr), 30)
    master_lags: list[int] = []
    slave_lags: list[int] = []
    stop = asyncio.Event()

    async def sample() -> None:
        while not stop.is_set():
            on_master, on_slave = await runtime_info(m.addr), await runtime_info(s.addr)
            assert on_master["haMaster"] == "true" and on_master["haSlaveNum"] == "1"
            (conn,) = json.loads(on_master["haConnectionInfo"])
            # the gap is the master's end minus what the slave acknowledged, both as reported
            assert int(on_master["slaveFallBehindMuch"]) == (int(on_master["haMasterCommitLogMaxOffset"])
                                                             - int(on_master["haPush2SlaveMaxOffset"]))
            assert conn["diff"] >= 0 and conn["slaveAckOffset"] <= int(on_master["commitLogMaxOffset"])
            master_lags.append(int(on_master["slaveFallBehindMuch"]))
            assert on_slave["haMaster"] == "false" and on_slave["haClientActivated"] == "true"
            slave_lags.append(int(on_slave["slaveFallBehindMuch"]))
            await asyncio.sleep(0.1)

    sampler = asyncio.create_task(sample())
    async with Producer("pg_ha_lag", ns) as producer:
        deadline = asyncio.get_running_loop().time() + 3.0

        async def worker(w: int) -> None:
            # Steady load: 16 in flight for 3 s, at most 50,000 sends.
            for i in range(w, 50_000, 16):
                if asyncio.get_running_loop().time() > deadline:
                    return
                result = await producer.send(Message("HaLag", f"lag-{i:05d}".encode() * 40))
                assert result.send_status == SendStatus.SEND_OK

        await asyncio.wait_for(asyncio.gather(*(worker(w) for w in range(16))), 60)
    stop.set()
    await sampler
    print(f"slave lag over {len(master_lags)} samples: master's view max {max(master_lags)} bytes, median "
          f"{sorted(master_lags)[len(master_lags) // 2]}; slave's view max {max(slave_lags)}")
    # Bounded: never more than a few MiB behind while the master takes ~1 MiB/s here; the
    # slave always knew its master's offset (never -1).
    assert len(master_lags) >= 3 and max(master_lags) < 8 * 1024 * 1024
    assert min(slave_lags) >= 0 and max(slave_lags) < 8 * 1024 * 1024
    end = await max_phy_offset(m.addr)

    async def caught_up() -> bool:
        on_master, on_slave = await runtime_info(m.addr), await runtime_info(s.addr)
        return (on_master["slaveFallBehindMuch"], on_slave["slaveFallBehindMuch"]) == ("0", "0") and \
            on_slave["haClientMaxOffset"] == str(end)

    assert await wait_for_async(caught_up, 20)
    (conn,) = json.loads((await runtime_info(m.addr))["haConnectionInfo"])
    assert (conn["slaveAckOffset"], conn["diff"], conn["inSync"]) == (end, 0, True)
    # The operator's tools show both brokers' HA figures.
    rows = (await run_cli_async("mqadmin", "clusterList", "--json", "-n", ns)).ok().json()
    by_id = {int(r["brokerId"]): r for r in rows if r["brokerName"] == "broker-ha"}
    assert by_id[0]["haMaster"] is True and by_id[0]["haSlaveNum"] == 1 and by_id[0]["slaveFallBehindMuch"] == 0
    assert by_id[0]["haPush2SlaveMaxOffset"] == end
    assert by_id[1]["haMaster"] is False and by_id[1]["slaveFallBehindMuch"] == 0
    assert by_id[1]["haClientMaxOffset"] == end and by_id[1]["haMasterCommitLogMaxOffset"] == end
    table = (await run_cli_async("mqadmin", "clusterList", "-n", ns)).ok().stdout
    assert "#HA" in table and "0 B unacked, 1 slave(s)" in table and "0 B behind" in table
    status = (await run_cli_async("mqadmin", "brokerStatus", "-b", s.addr, "-n", ns)).ok().stdout
    assert re.search(r"haMasterAddr\s.*\d+\.\d+\.\d+\.\d+:\d+", status)
    assert re.search(rf"haClientMaxOffset\s.*{end}", status)
    status = (await run_cli_async("mqadmin", "brokerStatus", "-b", m.addr, "-n", ns, "--json")).ok().json()
    assert status[m.addr]["haInSyncSlaveNums"] == 1 and status[m.addr]["slaveFallBehindMuch"] == 0
    # RocketMQ 5.x's haStatus (GET_BROKER_HA_STATUS): -c asks the cluster's masters.
    ha = (await run_cli_async("mqadmin", "haStatus", "-c", "DefaultCluster", "-n", ns, "--json")).ok().json()
    assert list(ha) == [m.addr]
    assert (ha[m.addr]["master"], ha[m.addr]["masterCommitLogMaxOffset"], ha[m.addr]["inSyncSlaveNums"]) == (
        True, end, 1)
    (conn,) = ha[m.addr]["haConnectionInfo"]
    assert (conn["slaveAckOffset"], conn["diff"], conn["inSync"]) == (end, 0, True)
    text = (await run_cli_async("mqadmin", "haStatus", "-b", m.addr, "-n", ns)).ok().stdout
    assert f"#MasterCommitLogMaxOffset\t{end}" in text and "#SlaveNum\t1" in text and "OK" in text
    text = (await run_cli_async("mqadmin", "haStatus", "-b", s.addr, "-n", ns)).ok().stdout
    host, port = ha_addr(m)
    assert f"#MasterAddr\t{host}:{port}" in text and f"#CommitLogMaxOffset\t{end}" in text


async def _slave_knows_its_master(addr: str) -> bool:
    return int((await runtime_info(addr)).get("haMasterCommitLogMaxOffset", "-1")) >= 0


async def delay_offsets(addr: str) -> dict[int, int]:
    """A broker's answer to GET_ALL_DELAY_OFFSET: each delay level's delivered-up-to offset."""
    client = RemotingClient()
    try:
        r = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_ALL_DELAY_OFFSET), 5)
        assert r.code == ResponseCode.SUCCESS
        return {int(k): int(v) for k, v in json.loads(r.body or b"{}").get("offsetTable", {}).items()}
    finally:
        await client.close()


async def test_slave_copies_the_masters_delay_offsets(daemons: DaemonSet) -> None:
    """SlaveSynchronize's GET_ALL_DELAY_OFFSET: once the master's schedule service delivered
    delayed messages, the slave's answer and its delayOffset.json hold the master's table (4.9.7
    syncs every 10 s, with no setting to shorten it: a bounded poll)."""
    ns = daemons.namesrv().addr
    m = master(daemons, ns)
    s = slave(daemons, ns)
    assert await connected(m)
    async with Producer("pg_ha_delay", ns) as producer:
        # level 1 (1 s) three times, level 2 (5 s) once
        for level in (1, 1, 1, 2):
            message = Message("HaDelay", f"delayed {level}".encode())
            message.delay_time_level = level
            assert (await producer.send(message)).send_status == SendStatus.SEND_OK

    async def delivered() -> bool:
        return await delay_offsets(m.addr) == {1: 3, 2: 1}

    assert await wait_for_async(delivered, 30), await delay_offsets(m.addr)
    # The slave never delivers on its own: whatever it shows comes from its master.
    assert await wait_for_async(lambda: _same_delay_offsets(m.addr, s.addr), 40), await delay_offsets(s.addr)
    path = os.path.join(s.home, "store", "config", "delayOffset.json")

    def persisted() -> bool:
        if not os.path.exists(path):
            return False
        with open(path) as f:
            table = json.load(f).get("offsetTable", {})
        return {int(k): int(v) for k, v in table.items()} == {1: 3, 2: 1}

    assert await wait_until(persisted, 10)


async def _same_delay_offsets(master_addr: str, slave_addr: str) -> bool:
    return await delay_offsets(slave_addr) == await delay_offsets(master_addr)
