"""Remoting failures, each naming the address involved so a person can act on it."""

from __future__ import annotations


class RemotingError(Exception):
    """Base of every remoting-layer failure."""


class RemotingConnectError(RemotingError):
    def __init__(self, addr: str, reason: str = "") -> None:
        super().__init__(f"connect to <{addr}> failed" + (f": {reason}" if reason else ""))
        self.addr = addr


class RemotingSendRequestError(RemotingError):
    """The request could not be written, or its connection closed before the answer came."""

    def __init__(self, addr: str, reason: str) -> None:
        super().__init__(f"send request to <{addr}> failed: {reason}")
        self.addr = addr


class RemotingTimeoutError(RemotingError):
    def __init__(self, addr: str, timeout: float) -> None:
        super().__init__(f"wait response on the channel <{addr}> timeout, {int(timeout * 1000)}(ms)")
        self.addr = addr
        self.timeout = timeout


class RemotingTooMuchRequestError(RemotingError):
    """More requests awaiting answers on one connection than the configured cap."""
