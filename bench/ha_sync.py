"""send_64 to a SYNC_MASTER with its slave against an ASYNC_MASTER with its slave, in one run.

A NameServer and two master/slave pairs as real subprocesses (ASYNC_FLUSH everywhere); each slave
learns its master's HA address from the NameServer. 1 KiB SEND_MESSAGE_V2 sends at 64 in flight
(bench/broker_send.py's loop); a SYNC_MASTER answers each once its slave acknowledged the
record, an ASYNC_MASTER at once. Rounds alternate which pair goes first.

    .venv/bin/python bench/ha_sync.py [--seconds 3] [--rounds 3]

Last line: one JSON object with sync_master_64, async_master_64 (medians, sends/s) and
ratio_sync_vs_async; beside them the CPU each pair's master and slave spent per send (medians,
µs), which a loaded machine skews far less than it skews rates.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from broker_send import BODY, measure_send, send_header

from rocketmq_py.common.loop import run
from rocketmq_py.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from tests.integration.daemons import DaemonSet

HA = ("haSendHeartbeatInterval=1000", "registerNameServerPeriod=10000", "messageIndexInChildProcess=false")


async def wait_for_slave(addr: str, timeout: float = 30.0) -> None:
    """Until a SYNC_MASTER answers a send SUCCESS (SLAVE_NOT_AVAILABLE before its slave is in)."""
    client = RemotingClient()
    deadline = time.monotonic() + timeout
    try:
        while True:
            r = await client.invoke(addr, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2,
                                                                  send_header("TBW102", 0), BODY), 10)
            if r.code == ResponseCode.SUCCESS:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"no slave acknowledged within {timeout} s: {r.code} {r.remark}")
            await asyncio.sleep(0.1)
    finally:
        await client.close()


def process_cpu(pid: int, tid: int | None = None) -> float:
    """CPU seconds (user and system) a live process has spent, or with ``tid`` one of its
    threads (``pid`` itself is its main thread: a daemon's event loop), from /proc; NaN off Linux."""
    try:
        with open(f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    figures: dict[str, list[float]] = {"sync": [], "async": []}
    # CPU µs per send: (pair, "master" | "slave") -> one figure per round
    cpu: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as home:
        ds = DaemonSet(home)
        try:
            ns = ds.namesrv().addr
            masters = {}
            pids: dict[str, dict[str, int]] = {}
            for role, name in (("SYNC_MASTER", "sync"), ("ASYNC_MASTER", "async")):
                master = ds.broker(ns, f"brokerRole={role}", f"brokerName=bench-{name}", *HA, name=f"{name}-m")
                slave = ds.broker(ns, "brokerRole=SLAVE", "brokerId=1", f"brokerName=bench-{name}", *HA,
                                  name=f"{name}-s")
                masters[name] = master.addr
                pids[name] = {"master": master.proc.pid, "slave": slave.proc.pid}
            run(wait_for_slave(masters["sync"]))
            for rnd in range(args.rounds):
                order = ["sync", "async"] if rnd % 2 == 0 else ["async", "sync"]
                got = {}
                for name in order:
                    before = {side: process_cpu(pid) for side, pid in pids[name].items()}
                    got[name] = run(measure_send(masters[name], f"HA64-{name}-{rnd}", 64, args.seconds))
                    sends = got[name] * args.seconds
                    for side, pid in pids[name].items():
                        cpu.setdefault((name, side), []).append((process_cpu(pid) - before[side]) / sends * 1e6)
                for name, rate in got.items():
                    figures[name].append(rate)
                print(f"round {rnd + 1}: sync_master_64={got['sync']:,.0f}  async_master_64={got['async']:,.0f}  "
                      "CPU µs/send (master/slave): " + "  ".join(
                          f"{name} {cpu[(name, 'master')][-1]:.1f}/{cpu[(name, 'slave')][-1]:.1f}"
                          for name in ("sync", "async")), flush=True)
        finally:
            ds.stop_all()
    sync, asyn = statistics.median(figures["sync"]), statistics.median(figures["async"])
    print(json.dumps({"sync_master_64": round(sync), "async_master_64": round(asyn),
                      "ratio_sync_vs_async": round(sync / asyn, 3)}
                     | {f"{name}_{side}_cpu_us_per_send": round(statistics.median(v), 1)
                        for (name, side), v in sorted(cpu.items())}))


if __name__ == "__main__":
    main()
