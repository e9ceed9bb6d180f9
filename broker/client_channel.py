"""What the broker knows of one client connection: who it is and when it last said so."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from rocketmq_py.remoting.connection import RemotingConnection

# A client silent this long (no heartbeat) is forgotten and its connection closed
# (docs/behaviours.md#liveness-and-registration).
CHANNEL_EXPIRED_TIMEOUT = 120.0


@dataclass(eq=False)
class ClientChannelInfo:
    channel: RemotingConnection
    client_id: str
    language: int
    version: int
    last_update: float = field(default_factory=time.monotonic)

    @property
    def client_addr(self) -> str:
        return self.channel.remote_addr
