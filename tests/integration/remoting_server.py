"""A real RemotingServer process for the remoting tests: ``python remoting_server.py``.

Prints ``LISTENING <port>`` once bound. Its processors exercise each server behaviour:

- 1001 ECHO: answers with the request's body and extFields.
- 1002 SLEEP: waits ``ms`` (ext) milliseconds, then answers.
- 1003 FAIL: raises, so the server must answer SYSTEM_ERROR and keep the connection.
- 1004 SLOW_LIMITED: like SLEEP, with a concurrency limit of 2 (SYSTEM_BUSY beyond).
- 1005 COUNT_ONEWAY: counts oneway requests; 1006 GET_COUNT returns the count.
- 1007 ASK_CLIENT: asks the client back (code 2001) on the same connection and answers with
  the client's answer body.
- 1008 CLOSE_ME: closes the caller's connection.
"""

from __future__ import annotations

import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from rocketmq_py.common.loop import run
from rocketmq_py.remoting import RemotingCommand, RemotingServer, ResponseCode, ServerConfig

ECHO, SLEEP, FAIL, SLOW_LIMITED, COUNT_ONEWAY, GET_COUNT, ASK_CLIENT, CLOSE_ME = range(1001, 1009)
CLIENT_QUESTION = 2001


async def main() -> None:
    server = RemotingServer(ServerConfig(host="127.0.0.1", port=0, scan_interval=0.2))
    count = 0

    async def echo(conn, req):  # type: ignore[no-untyped-def]
        return req.response(header=dict(req.ext_fields or {}), body=req.body)

    async def sleep(conn, req):  # type: ignore[no-untyped-def]
        await asyncio.sleep(int((req.ext_fields or {}).get("ms", "0")) / 1000)
        return req.response(body=req.body)

    async def fail(conn, req):  # type: ignore[no-untyped-def]
        raise RuntimeError("deliberate failure")

    async def count_oneway(conn, req):  # type: ignore[no-untyped-def]
        nonlocal count
        count += 1

    async def get_count(conn, req):  # type: ignore[no-untyped-def]
        return req.response(header={"count": str(count)})

    async def ask_client(conn, req):  # type: ignore[no-untyped-def]
        answer = await conn.invoke(RemotingCommand.request(CLIENT_QUESTION, {"q": "who"}), 3.0)
        return req.response(answer.code, body=answer.body)

    async def close_me(conn, req):  # type: ignore[no-untyped-def]
        conn.close("asked to")

    server.register_processor(ECHO, echo)
    server.register_processor(SLEEP, sleep)
    server.register_processor(FAIL, fail)
    server.register_processor(SLOW_LIMITED, sleep, max_concurrency=2)
    server.register_processor(COUNT_ONEWAY, count_oneway)
    server.register_processor(GET_COUNT, get_count)
    server.register_processor(ASK_CLIENT, ask_client)
    server.register_processor(CLOSE_ME, close_me)
    assert int(ResponseCode.SUCCESS) == 0
    await server.start()
    print(f"LISTENING {server.port}", flush=True)
    await asyncio.sleep(600)  # bounded life: the test stops it by PID long before


if __name__ == "__main__":
    run(main())
