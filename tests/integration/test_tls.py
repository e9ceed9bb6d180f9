"""TLS on remoting connections (remoting/tls.py): a server in permissive mode serves TLS and
plaintext clients on one port, in enforcing mode TLS only; client and server certificates
checked when asked; the SDK, mqadmin and broker registration over TLS against real daemons."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rocketmq_py.client import Admin, LitePullConsumer, Message, MQClientError, Producer
from rocketmq_py.common.properties import ConfigError
from rocketmq_py.remoting import RemotingClient, RemotingCommand, RemotingServer, ServerConfig
from rocketmq_py.remoting.client import ClientConfig
from rocketmq_py.remoting.exceptions import RemotingError
from rocketmq_py.remoting.protocol.heartbeat import ConsumeFromWhere
from rocketmq_py.remoting.tls import TlsConfig, TlsMode, client_ssl_context, server_ssl_context
from tests.integration.cli import run_cli
from tests.integration.daemons import DaemonSet
from tests.integration.ha_cluster import ha_addr, log_text, master, slave
from tests.tls_certs import Pki, make_pki
from tests.waiting import wait_for_async

ECHO = 1001


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(str(tmp_path_factory.mktemp("pki")))


def _server_tls(pki: Pki, mode: str, **extra: str) -> TlsConfig:
    return TlsConfig.model_validate({"tls.server.mode": mode, "tls.server.certPath": pki.server.cert,
                                     "tls.server.keyPath": pki.server.key, **extra})


@pytest.fixture
async def servers(pki: Pki) -> AsyncIterator[dict[str, RemotingServer]]:
    """An echo server per mode, in this process."""
    started: dict[str, RemotingServer] = {}
    for mode, extra in [("permissive", {}), ("enforcing", {}),
                        ("mutual", {"tls.server.need.client.auth": "require",
                                    "tls.server.trustCertPath": pki.ca.cert})]:
        cfg = _server_tls(pki, "enforcing" if mode == "mutual" else mode, **extra)
        server = RemotingServer(ServerConfig(host="127.0.0.1", port=0, tls_mode=cfg.tls_server_mode,
                                             ssl_context=server_ssl_context(cfg)))
        server.register_processor(ECHO, lambda conn, req: req.response(body=req.body))
        await server.start()
        started[mode] = server
    yield started
    for server in started.values():
        await server.close()


async def _echo(port: int, ctx: ssl.SSLContext | None, body: bytes = b"hello") -> bytes | None:
    """The echoed body, after checking the connection is TLS exactly when ``ctx`` is given."""
    client = RemotingClient(ClientConfig(ssl_context=ctx, connect_timeout=3.0))
    try:
        addr = f"127.0.0.1:{port}"
        answer = await client.invoke(addr, RemotingCommand.request(ECHO, body=body), 3.0)
        conn = await client.get_connection(addr)
        sealed = conn._transport.get_extra_info("ssl_object")  # type: ignore[union-attr]
        assert (sealed is not None) == (ctx is not None)
        return answer.body
    finally:
        await client.close()


async def test_permissive_serves_tls_and_plaintext_on_one_port(servers: dict[str, RemotingServer]) -> None:
    port = servers["permissive"].port
    assert await _echo(port, client_ssl_context(), b"over tls") == b"over tls"
    assert await _echo(port, None, b"in the clear") == b"in the clear"
    tls_conns = [c for c in servers["permissive"].connections if c._transport is not None]
    assert tls_conns == [] or all(c.remote_addr for c in tls_conns)


async def test_enforcing_refuses_plaintext(servers: dict[str, RemotingServer], caplog: pytest.LogCaptureFixture
                                           ) -> None:
    port = servers["enforcing"].port
    assert await _echo(port, client_ssl_context(), b"over tls") == b"over tls"
    with pytest.raises(RemotingError):
        await _echo(port, None)
    assert any("tls.server.mode=enforcing takes TLS only" in r.getMessage() for r in caplog.records)


async def test_certificates_checked_both_ways(servers: dict[str, RemotingServer], pki: Pki) -> None:
    trusting = TlsConfig.model_validate({"tls.client.authServer": "true", "tls.client.trustCertPath": pki.ca.cert})
    assert await _echo(servers["enforcing"].port, client_ssl_context(trusting)) == b"hello"
    distrusting = TlsConfig.model_validate({"tls.client.authServer": "true",
                                            "tls.client.trustCertPath": pki.stranger.cert})
    with pytest.raises(RemotingError):
        await _echo(servers["enforcing"].port, client_ssl_context(distrusting))
    mutual = servers["mutual"].port
    with pytest.raises(RemotingError):
        await _echo(mutual, client_ssl_context())  # no client certificate
    stranger = TlsConfig.model_validate({"tls.client.certPath": pki.stranger.cert,
                                         "tls.client.keyPath": pki.stranger.key})
    with pytest.raises(RemotingError):
        await _echo(mutual, client_ssl_context(stranger))
    signed = TlsConfig.model_validate({"tls.client.certPath": pki.client.cert, "tls.client.keyPath": pki.client.key})
    assert await _echo(mutual, client_ssl_context(signed)) == b"hello"


async def test_silent_and_garbage_peers_never_stop_the_acceptor(servers: dict[str, RemotingServer]) -> None:
    port = servers["permissive"].port
    silent = socket.create_connection(("127.0.0.1", port))
    half = socket.create_connection(("127.0.0.1", port))
    half.sendall(b"\x16\x03\x01\x00")  # a handshake record cut short
    half.close()
    try:
        assert await _echo(port, client_ssl_context()) == b"hello"
        assert await _echo(port, None) == b"hello"
    finally:
        silent.close()


def test_config_errors_name_the_key(pki: Pki) -> None:
    with pytest.raises(ConfigError, match=r"tls\.server\.certPath"):
        server_ssl_context(TlsConfig.model_validate({"tls.server.mode": "permissive"}))
    with pytest.raises(ConfigError, match="cannot load"):
        server_ssl_context(_server_tls(pki, "enforcing", **{"tls.server.keyPath": pki.client.key}))
    assert server_ssl_context(TlsConfig()) is None
    assert TlsConfig.model_validate({"tls.server.mode": "enforcing"}).tls_server_mode is TlsMode.ENFORCING


# -- daemons ----------------------------------------------------------------------------------

def _tls_options(pki: Pki, mode: str) -> list[str]:
    return [f"tls.server.mode={mode}", f"tls.server.certPath={pki.server.cert}",
            f"tls.server.keyPath={pki.server.key}"]


async def _send_and_read(namesrv: str, topic: str, use_tls: bool) -> list[bytes]:
    async with Producer("TlsProducer", namesrv, use_tls=use_tls, instance_name=f"tls-{use_tls}") as producer:
        sent = await producer.send(Message(topic, b"sealed"))
        assert sent.send_status.name == "SEND_OK"
    consumer = LitePullConsumer("TlsGroup", namesrv, use_tls=use_tls, instance_name=f"tls-c-{use_tls}",
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(topic, "*")
    await consumer.start()
    got: list[bytes] = []
    try:
        async def drained() -> bool:
            got.extend(m.body for m in await consumer.poll(0.5))
            return bool(got)

        assert await wait_for_async(drained, 30, 0)
    finally:
        await consumer.shutdown()
    return got


async def test_sdk_against_permissive_broker(daemons: DaemonSet, pki: Pki) -> None:
    ns = daemons.namesrv(*_tls_options(pki, "permissive"))
    broker = daemons.broker(ns.addr, *_tls_options(pki, "permissive"))
    async with Admin(ns.addr, use_tls=True) as admin:
        await admin.create_topic("TlsPermissive", broker_addr=broker.addr)
    assert await _send_and_read(ns.addr, "TlsPermissive", use_tls=True) == [b"sealed"]
    async with Producer("PlainProducer", ns.addr, instance_name="plain") as plain:
        assert (await plain.send(Message("TlsPermissive", b"clear"))).send_status.name == "SEND_OK"


async def test_enforcing_cluster_with_tls_registration_and_mqadmin(daemons: DaemonSet, pki: Pki) -> None:
    ns = daemons.namesrv(*_tls_options(pki, "enforcing"))
    broker = daemons.broker(ns.addr, *_tls_options(pki, "enforcing"), "tls.enable=true")
    # the broker registered over TLS: mqadmin --tls sees it and creates a topic through it
    listed = run_cli("mqadmin", "clusterList", "-n", ns.addr, "--tls", "--json").ok().json()
    assert broker.addr in str(listed)
    run_cli("mqadmin", "updateTopic", "-t", "TlsEnforcing", "-b", broker.addr, "-n", ns.addr, "--tls").ok()
    run_cli("mqadmin", "clusterList", "-n", ns.addr).failed_with_one_line()
    assert await _send_and_read(ns.addr, "TlsEnforcing", use_tls=True) == [b"sealed"]
    with pytest.raises((MQClientError, RemotingError)):
        async with Producer("PlainProducer", ns.addr, instance_name="plain", send_msg_timeout=2.0) as plain:
            await plain.send(Message("TlsEnforcing", b"clear"))
    assert "tls.server.mode=enforcing takes TLS only" in _log_text(ns.lines, Path(ns.home, "logs", "namesrv.log"))


def _log_text(lines: list[str], path: Path) -> str:
    return "\n".join(lines) + (path.read_text() if path.exists() else "")


async def test_ha_replication_over_tls(daemons: DaemonSet, pki: Pki) -> None:
    """Brokers enforcing TLS replicate over a TLS HA connection (rocketmq-py's addition), and the
    HA port refuses a plaintext slave."""
    ns = daemons.namesrv(*_tls_options(pki, "permissive")).addr
    tls = (*_tls_options(pki, "enforcing"), "tls.enable=true")
    m = master(daemons, ns, "ASYNC_MASTER", *tls)
    s = slave(daemons, ns, *tls)
    async with Producer("pg_ha_tls", ns, use_tls=True) as producer:
        for i in range(50):
            assert (await producer.send(Message("HaTls", f"m{i}".encode()))).send_status.name == "SEND_OK"
    async with Admin(ns, use_tls=True) as admin:
        async def offset(addr: str) -> int:
            return int((await admin.fetch_broker_runtime_stats(addr))["commitLogMaxOffset"])

        end = await offset(m.addr)

        async def caught_up() -> bool:
            return await offset(s.addr) >= end

        assert await wait_for_async(caught_up, 20)
    assert "(TLS)" in log_text(m)
    host, port = ha_addr(m)
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(struct.pack(">q", 0))  # a plaintext slave's first report
    await writer.drain()
    assert await asyncio.wait_for(reader.read(), 10) == b""  # closed, nothing replicated to it
    writer.close()
    with contextlib.suppress(OSError, ssl.SSLError):
        await writer.wait_closed()


async def test_tls_config_file_supplies_the_certificates(daemons: DaemonSet, pki: Pki, tmp_path: Path) -> None:
    """The broker's certificate paths come only from tls.config.file (4.9's TlsHelper reads them
    there and the mode from elsewhere): it enforces TLS, serves a TLS client, refuses plaintext."""
    tls_file = tmp_path / "tls.properties"
    tls_file.write_text(f"tls.server.certPath={pki.server.cert}\ntls.server.keyPath={pki.server.key}\n")
    ns = daemons.namesrv(*_tls_options(pki, "permissive"))
    broker = daemons.broker(ns.addr, "tls.server.mode=enforcing", f"tls.config.file={tls_file}")
    async with Admin(ns.addr, use_tls=True) as admin:
        await admin.create_topic("TlsFromFile", broker_addr=broker.addr)
    assert await _send_and_read(ns.addr, "TlsFromFile", use_tls=True) == [b"sealed"]
    with pytest.raises((MQClientError, RemotingError)):
        async with Producer("PlainProducer", ns.addr, instance_name="plain", send_msg_timeout=2.0) as plain:
            await plain.send(Message("TlsFromFile", b"clear"))
    assert "tls.server.mode=enforcing takes TLS only" in log_text(broker)


def test_tls_config_file_named_but_missing_stops_the_broker(tmp_path: Path) -> None:
    missing = tmp_path / "absent.properties"
    line = run_cli("mqbroker", "-n", "127.0.0.1:1", "-l", "0", "--store", str(tmp_path / "store"),
                   "-o", "tls.server.mode=enforcing", "-o", f"tls.config.file={missing}").failed_with_one_line()
    assert f"tls.config.file={missing}: cannot read" in line


def test_tls_config_file_overrides_own_keys_but_not_the_mode(pki: Pki, tmp_path: Path) -> None:
    tls_file = tmp_path / "tls.properties"
    tls_file.write_text(f"tls.server.mode=disabled\ntls.server.certPath={pki.server.cert}\n"
                        f"tls.server.keyPath={pki.server.key}\n")
    # the daemon's own keyPath (a key that does not match the certificate) is overridden by the file's
    cfg = _server_tls(pki, "enforcing", **{"tls.server.keyPath": pki.client.key, "tls.config.file": str(tls_file)})
    assert server_ssl_context(cfg) is not None
    with pytest.raises(ConfigError, match=r"tls\.config\.file=.*: cannot read"):
        server_ssl_context(TlsConfig.model_validate({"tls.config.file": str(tmp_path / "none")}))
