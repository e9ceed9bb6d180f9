"""NettyServerConfig: a daemon's listener settings under RocketMQ's property names."""

from __future__ import annotations

from pydantic import ConfigDict

from rocketmq_py.common.busy_poll import DEFAULT_BUSY_POLL_MAX_MICROS
from rocketmq_py.remoting.frame import DEFAULT_MAX_FRAME_SIZE
from rocketmq_py.remoting.server import ServerConfig
from rocketmq_py.remoting.tls import TlsConfig, server_ssl_context


class NettyServerConfig(TlsConfig):
    """Listener settings; with Java's tls.* keys beside them (TlsConfig), which a Java daemon
    takes from system properties and ours from the same properties file as the rest."""

    model_config = ConfigDict(validate_assignment=True, populate_by_name=True)

    listenPort: int = 8888
    bindAddress: str = "0.0.0.0"
    serverChannelMaxIdleTimeSeconds: int = 120
    # com.rocketmq.remoting.frameMaxLength: the largest frame a peer may send.
    frameMaxLength: int = DEFAULT_MAX_FRAME_SIZE
    # rocketmq-py's own: how long the event loop may keep polling after a read before it sleeps,
    # in microseconds (common/busy_poll.py); 0 turns it off.
    serverBusyPollMaxMicros: int = DEFAULT_BUSY_POLL_MAX_MICROS

    def to_server_config(self, port: int | None = None) -> ServerConfig:
        return ServerConfig(host=self.bindAddress, port=self.listenPort if port is None else port,
                            max_frame_size=self.frameMaxLength,
                            channel_max_idle=float(self.serverChannelMaxIdleTimeSeconds),
                            busy_poll_max_micros=self.serverBusyPollMaxMicros,
                            tls_mode=self.tls_server_mode, ssl_context=server_ssl_context(self))
