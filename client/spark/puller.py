"""PULL_MESSAGE over one blocking socket: the transport of a Spark task.

A Spark Python worker is synchronous and single-purpose: it reads one queue range and hands
Arrow batches to the JVM. Driving the SDK's background event loop from it cost a second thread
fighting the decoding thread for the GIL, and a future per call. Here the task's own thread
writes a window of requests, and reads and frames the answers itself (the remoting layer's
sans-IO ``FrameDecoder``), so one window can be in flight while the previous one is decoded.
"""

from __future__ import annotations

import socket
import time

from rocketmq_py.acl.acl_client_rpc_hook import sign_request
from rocketmq_py.acl.session_credentials import SessionCredentials
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.exceptions import RemotingConnectError, RemotingTimeoutError
from rocketmq_py.remoting.frame import FrameDecoder, encode_frame

_RECV_SIZE = 1 << 20


class BlockingPuller:
    """One connection to one broker; requests go out in windows, answers are matched by opaque."""

    def __init__(self, addr: str, timeout: float, credentials: SessionCredentials | None = None) -> None:
        self.addr = addr
        self.timeout = timeout
        self._credentials = credentials
        host, _, port = addr.rpartition(":")
        try:
            self._sock = socket.create_connection((host, int(port)), timeout)
        except OSError as exc:
            raise RemotingConnectError(addr, str(exc)) from None
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._decoder = FrameDecoder()
        self._answers: dict[int, RemotingCommand] = {}
        self._waiting: set[int] = set()

    def send(self, requests: list[RemotingCommand]) -> list[int]:
        """Write ``requests`` at once (signed, with an ACL account); their opaques, to ``receive`` by."""
        if self._credentials is not None:
            for request in requests:
                sign_request(request, self._credentials)
        self._sock.sendall(b"".join(map(encode_frame, requests)))
        opaques = [r.opaque for r in requests]
        self._waiting.update(opaques)
        return opaques

    def forget(self, opaques: list[int]) -> None:
        """Answers to these are no longer wanted (dropped when they arrive)."""
        self._waiting.difference_update(opaques)
        for opaque in opaques:
            self._answers.pop(opaque, None)

    def receive(self, opaques: list[int]) -> list[RemotingCommand]:
        """The answers to ``opaques``, in their order; RemotingTimeoutError after ``timeout``."""
        answers = self._answers
        deadline = time.monotonic() + self.timeout
        while not all(o in answers for o in opaques):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RemotingTimeoutError(self.addr, self.timeout)
            self._sock.settimeout(remaining)
            try:
                data = self._sock.recv(_RECV_SIZE)
            except TimeoutError:
                continue
            except OSError as exc:
                raise RemotingConnectError(self.addr, str(exc)) from None
            if not data:
                raise RemotingConnectError(self.addr, "the broker closed the connection")
            for cmd in self._decoder.feed(data):
                if cmd.opaque in self._waiting:
                    answers[cmd.opaque] = cmd
        self._waiting.difference_update(opaques)
        return [answers.pop(o) for o in opaques]

    def close(self) -> None:
        self._sock.close()
