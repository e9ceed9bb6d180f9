"""send_64 over TLS against plaintext, to one broker in permissive mode, in one run.

A real ``mqbroker`` subprocess (ASYNC_FLUSH, ``tls.server.mode=permissive`` with a certificate
made for the run, EC P-256) serves both kinds of connection on one port; each round measures 1 KiB
SEND_MESSAGE_V2 sends at 64 in flight over a plaintext connection and over a TLS one (Java's
client defaults: the server's certificate not verified), alternating which goes first.

    .venv/bin/python bench/tls_send.py [--seconds 3] [--rounds 3]

Last line: one JSON object with send_64_plain, send_64_tls (medians, sends/s) and ratio_tls
(send_64_tls / send_64_plain of the same rounds).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from broker_send import SendTarget, compare_send_64, round_parser, running_broker

from rocketmq_py.remoting.tls import client_ssl_context
from tests.tls_certs import make_pki


def main() -> None:
    ns = round_parser(__doc__).parse_args()
    with tempfile.TemporaryDirectory() as home:
        pki = make_pki(os.path.join(home, "pki"))
        with running_broker(os.path.join(home, "store"), [
                "tls.server.mode=permissive", f"tls.server.certPath={pki.server.cert}",
                f"tls.server.keyPath={pki.server.key}"]) as (_, addr):
            result = compare_send_64("tls", SendTarget(addr), SendTarget(addr, client_ssl_context()),
                                     ns.seconds, ns.rounds)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
