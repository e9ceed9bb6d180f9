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

import argparse
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from broker_send import measure_send, start_broker

from rocketmq_py.common.loop import run
from rocketmq_py.remoting.tls import client_ssl_context
from tests.tls_certs import make_pki


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    ns = parser.parse_args()
    plain: list[float] = []
    sealed: list[float] = []
    with tempfile.TemporaryDirectory() as home:
        pki = make_pki(os.path.join(home, "pki"))
        proc, addr = start_broker(os.path.join(home, "store"), [
            "tls.server.mode=permissive", f"tls.server.certPath={pki.server.cert}",
            f"tls.server.keyPath={pki.server.key}"])
        try:
            for rnd in range(ns.rounds):
                order = [("plain", None), ("tls", client_ssl_context())]
                if rnd % 2:
                    order.reverse()
                figures = {name: run(measure_send(addr, f"TLS64-{name}-{rnd}", 64, ns.seconds, ctx))
                           for name, ctx in order}
                plain.append(figures["plain"])
                sealed.append(figures["tls"])
                print(f"round {rnd + 1}: send_64_plain={figures['plain']:,.0f}  send_64_tls={figures['tls']:,.0f}",
                      flush=True)
        finally:
            proc.terminate()
            proc.wait(30)
    result = {"send_64_plain": round(statistics.median(plain)), "send_64_tls": round(statistics.median(sealed)),
              "ratio_tls": round(statistics.median(t / p for t, p in zip(sealed, plain, strict=True)), 3)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
