"""Remoting failures, each naming the address involved so a person can act on it."""

from __future__ import annotations

from rocketmq_py.remoting.codes import ResponseCode


class RemotingError(Exception):
    """Base of every remoting-layer failure."""


class RemotingCommandException(ValueError):
    """A request its handler refuses, with the response code and remark to answer (Java's
    RemotingCommandException). The processor table answers it and logs it as a refusal, so a
    handler refuses bad input in one line wherever it finds it; a ValueError, because like an
    unreadable header it is the request's fault, never the handler's."""

    def __init__(self, remark: str, code: int = ResponseCode.SYSTEM_ERROR) -> None:
        super().__init__(remark)
        self.remark = remark
        self.code = code


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
