"""send_64 to a broker with aclEnable=true against one without, in one run.

Two real ``mqbroker`` subprocesses (ASYNC_FLUSH), one checking every request against a
plain_acl.yml with one admin account; 1 KiB SEND_MESSAGE_V2 sends at 64 in flight, signed by the
client (AclClientRPCHook) for the ACL broker, alternating which broker goes first each round.

    .venv/bin/python bench/acl_send.py [--seconds 3] [--rounds 3]

Last line: one JSON object with send_64_plain, send_64_acl (medians, sends/s) and ratio_acl.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from broker_send import SendTarget, compare_send_64, round_parser, running_broker

from rocketmq_py.acl.session_credentials import SessionCredentials

ACCOUNT = SessionCredentials("bench-admin", "bench-admin-secret")


def main() -> None:
    ns = round_parser(__doc__).parse_args()
    with tempfile.TemporaryDirectory() as home:
        acl = os.path.join(home, "plain_acl.yml")
        with open(acl, "w") as f:
            f.write(f"accounts:\n  - {{accessKey: {ACCOUNT.access_key}, secretKey: {ACCOUNT.secret_key}, "
                    "admin: true}\n")
        with running_broker(os.path.join(home, "plain")) as (_, plain_addr), \
                running_broker(os.path.join(home, "acl"), ["aclEnable=true", f"aclPlainFile={acl}"]) as (_, acl_addr):
            result = compare_send_64("acl", SendTarget(plain_addr), SendTarget(acl_addr, credentials=ACCOUNT),
                                     ns.seconds, ns.rounds)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
