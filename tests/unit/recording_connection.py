"""A stand-in for a connection where a processor table is driven without sockets."""

from __future__ import annotations

from rocketmq_py.remoting.command import RemotingCommand


class RecordingConnection:
    """What dispatch needs of a connection, its answers kept for the test to read."""

    is_open = True

    def __init__(self, remote_addr: str = "127.0.0.1:1") -> None:
        self.remote_addr = remote_addr
        self.written: list[RemotingCommand] = []

    def write_command(self, cmd: RemotingCommand) -> None:
        self.written.append(cmd)
