"""send_64 to a broker with aclEnable=true against one without, in one run.

Two real ``mqbroker`` subprocesses (ASYNC_FLUSH), one checking every request against a
plain_acl.yml with one admin account; 1 KiB SEND_MESSAGE_V2 sends at 64 in flight, signed by the
client (AclClientRPCHook) for the ACL broker, alternating which broker goes first each round.

    .venv/bin/python bench/acl_send.py [--seconds 3] [--rounds 3]

Last line: one JSON object with send_64_plain, send_64_acl (medians, sends/s) and ratio_acl.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from broker_send import measure_send, start_broker

from rocketmq_py.acl.session_credentials import SessionCredentials
from rocketmq_py.common.loop import run

ACCOUNT = SessionCredentials("bench-admin", "bench-admin-secret")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    ns = parser.parse_args()
    plain: list[float] = []
    checked: list[float] = []
    with tempfile.TemporaryDirectory() as home:
        acl = os.path.join(home, "plain_acl.yml")
        with open(acl, "w") as f:
            f.write(f"accounts:\n  - {{accessKey: {ACCOUNT.access_key}, secretKey: {ACCOUNT.secret_key}, "
                    "admin: true}\n")
        plain_proc, plain_addr = start_broker(os.path.join(home, "plain"))
        acl_proc, acl_addr = start_broker(os.path.join(home, "acl"), ["aclEnable=true", f"aclPlainFile={acl}"])
        try:
            for rnd in range(ns.rounds):
                order = [("plain", plain_addr, None), ("acl", acl_addr, ACCOUNT)]
                if rnd % 2:
                    order.reverse()
                figures = {name: run(measure_send(addr, f"ACL64-{name}-{rnd}", 64, ns.seconds, None, creds))
                           for name, addr, creds in order}
                plain.append(figures["plain"])
                checked.append(figures["acl"])
                print(f"round {rnd + 1}: send_64_plain={figures['plain']:,.0f}  send_64_acl={figures['acl']:,.0f}",
                      flush=True)
        finally:
            for proc in (plain_proc, acl_proc):
                proc.terminate()
                proc.wait(30)
    result = {"send_64_plain": round(statistics.median(plain)), "send_64_acl": round(statistics.median(checked)),
              "ratio_acl": round(statistics.median(a / p for a, p in zip(checked, plain, strict=True)), 3)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
