"""TLS on remoting connections, with RocketMQ 4.9's ``tls.*`` property names (TlsSystemConfig).

A server's ``tls.server.mode``:
- ``disabled``: plaintext only;
- ``permissive``: each connection's first byte decides -- 0x16, a TLS record of type handshake
  (a ClientHello), makes it TLS; anything else keeps it plaintext, so old and new clients share
  one port (Java's TlsModeHandler);
- ``enforcing``: TLS only; a plaintext connection is closed at its first byte, with a WARN line.

Java defaults the mode to permissive with a self-signed test certificate
(``tls.test.mode.enable``); rocketmq-py defaults to disabled and asks for a certificate when a
mode is set (docs/tls.md). A client (``tls.enable``) by default does not verify the server, as
Java's client (``tls.client.authServer=false``).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
import socket
import ssl

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rocketmq_py.common.properties import ConfigError, parse_properties

log = logging.getLogger(__name__)

# The first byte of a TLS record carrying a handshake message: how permissive mode tells a
# ClientHello from a RocketMQ frame (whose first byte is the top of a length, 0 for any frame
# under 16 MiB).
TLS_HANDSHAKE_RECORD = 0x16


class TlsMode(enum.StrEnum):
    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"


class ClientAuth(enum.StrEnum):
    NONE = "none"
    OPTIONAL = "optional"
    REQUIRE = "require"


# TlsSystemConfig.tlsConfigFile's default: read when it exists, skipped when not (as Java).
DEFAULT_TLS_CONFIG_FILE = "/etc/rocketmq/tls.properties"

# The keys 4.9's TlsHelper.extractTlsConfigFromFile takes from tls.config.file, each overriding the
# value set elsewhere; tls.server.mode and tls.enable are not among them (docs/tls.md).
TLS_CONFIG_FILE_KEYS = frozenset({
    "tls.test.mode.enable", "tls.server.need.client.auth", "tls.server.keyPath", "tls.server.keyPassword",
    "tls.server.certPath", "tls.server.authClient", "tls.server.trustCertPath", "tls.client.keyPath",
    "tls.client.keyPassword", "tls.client.certPath", "tls.client.authServer", "tls.client.trustCertPath"})


class TlsConfig(BaseModel):
    """The ``tls.*`` keys a daemon reads from its properties file or ``-o``."""

    model_config = ConfigDict(populate_by_name=True, validate_assignment=True)

    tls_config_file: str | None = Field(None, alias="tls.config.file")
    tls_server_mode: TlsMode = Field(TlsMode.DISABLED, alias="tls.server.mode")
    tls_enable: bool = Field(False, alias="tls.enable")
    tls_server_need_client_auth: ClientAuth = Field(ClientAuth.NONE, alias="tls.server.need.client.auth")
    tls_server_key_path: str | None = Field(None, alias="tls.server.keyPath")
    tls_server_key_password: str | None = Field(None, alias="tls.server.keyPassword")
    tls_server_cert_path: str | None = Field(None, alias="tls.server.certPath")
    tls_server_auth_client: bool = Field(False, alias="tls.server.authClient")
    tls_server_trust_cert_path: str | None = Field(None, alias="tls.server.trustCertPath")
    tls_client_key_path: str | None = Field(None, alias="tls.client.keyPath")
    tls_client_key_password: str | None = Field(None, alias="tls.client.keyPassword")
    tls_client_cert_path: str | None = Field(None, alias="tls.client.certPath")
    tls_client_auth_server: bool = Field(False, alias="tls.client.authServer")
    tls_client_trust_cert_path: str | None = Field(None, alias="tls.client.trustCertPath")


def with_tls_config_file(cfg: TlsConfig) -> TlsConfig:
    """The settings a context is built from: ``cfg``'s, overridden by the keys of its
    tls.config.file (Java reads the file each time it builds a context, as here). A file named
    explicitly must be readable (ConfigError naming it); the default one is read only if present."""
    path = cfg.tls_config_file or DEFAULT_TLS_CONFIG_FILE
    if not cfg.tls_config_file and not os.path.isfile(path):
        return cfg
    try:
        with open(path, encoding="utf-8") as f:
            props = parse_properties(f.read())
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"tls.config.file={path}: cannot read: {reason}") from None
    ignored = sorted(set(props) - TLS_CONFIG_FILE_KEYS)
    if ignored:
        log.warning("tls.config.file=%s: ignored %s (the file sets only the keys Java's TlsHelper reads)",
                    path, ", ".join(ignored))
    own = {f.alias: getattr(cfg, name) for name, f in TlsConfig.model_fields.items() if f.alias}
    updates = {k: v for k, v in props.items() if k in TLS_CONFIG_FILE_KEYS and k in own}
    try:
        return TlsConfig.model_validate({k: v for k, v in own.items() if v is not None} | updates)
    except ValidationError as exc:
        problems = "; ".join(f"{e['loc'][0]}={e.get('input')!r}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"tls.config.file={path}: {problems}") from None


def _load_chain(ctx: ssl.SSLContext, cert: str, key: str | None, password: str | None, side: str) -> None:
    try:
        ctx.load_cert_chain(cert, key, password)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"tls.{side}.certPath={cert} / tls.{side}.keyPath={key}: cannot load: {exc}") from None


def _load_trust(ctx: ssl.SSLContext, path: str, side: str) -> None:
    try:
        ctx.load_verify_locations(path)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"tls.{side}.trustCertPath={path}: cannot load: {exc}") from None


def server_ssl_context(cfg: TlsConfig) -> ssl.SSLContext | None:
    """The context a server's TLS connections use; None when the mode is disabled."""
    cfg = with_tls_config_file(cfg)
    if cfg.tls_server_mode is TlsMode.DISABLED:
        return None
    if not cfg.tls_server_cert_path or not cfg.tls_server_key_path:
        raise ConfigError(f"tls.server.mode={cfg.tls_server_mode.value} needs tls.server.certPath and "
                          "tls.server.keyPath (PEM files)")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _load_chain(ctx, cfg.tls_server_cert_path, cfg.tls_server_key_path, cfg.tls_server_key_password, "server")
    auth = cfg.tls_server_need_client_auth
    ctx.verify_mode = {ClientAuth.NONE: ssl.CERT_NONE, ClientAuth.OPTIONAL: ssl.CERT_OPTIONAL,
                       ClientAuth.REQUIRE: ssl.CERT_REQUIRED}[auth]
    if auth is not ClientAuth.NONE:
        if cfg.tls_server_trust_cert_path:
            _load_trust(ctx, cfg.tls_server_trust_cert_path, "server")
        else:
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    return ctx


def client_ssl_context(cfg: TlsConfig | None = None) -> ssl.SSLContext:
    """The context a client's connections use: the server verified against
    tls.client.trustCertPath only with tls.client.authServer=true (no host name check, as Java),
    the client's own certificate presented when tls.client.certPath is set."""
    cfg = with_tls_config_file(cfg or TlsConfig())
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    if cfg.tls_client_auth_server:
        ctx.verify_mode = ssl.CERT_REQUIRED
        if cfg.tls_client_trust_cert_path:
            _load_trust(ctx, cfg.tls_client_trust_cert_path, "client")
        else:
            ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    else:
        ctx.verify_mode = ssl.CERT_NONE
    if cfg.tls_client_cert_path:
        _load_chain(ctx, cfg.tls_client_cert_path, cfg.tls_client_key_path, cfg.tls_client_key_password, "client")
    return ctx


async def sniff_tls(sock: socket.socket, timeout: float | None) -> bool | None:
    """Whether the peer's first byte opens a TLS handshake, looked at without reading it (the
    TLS layer or the frame decoder reads it next); None when the peer closed first. Waits at most
    ``timeout`` seconds for that byte (TimeoutError)."""
    loop = asyncio.get_running_loop()
    readable = loop.create_future()
    fd = sock.fileno()

    def on_readable() -> None:
        if not readable.done():
            readable.set_result(None)

    loop.add_reader(fd, on_readable)
    try:
        await asyncio.wait_for(readable, timeout)
    finally:
        loop.remove_reader(fd)
    first = sock.recv(1, socket.MSG_PEEK)
    if not first:
        return None
    return first[0] == TLS_HANDSHAKE_RECORD
