"""Remoting failures, each naming the address involved so a person can act on it."""

from __future__ import annotations

import errno


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


class AddressInUseError(OSError):
    """A listen address another process holds: the one failure every daemon's first run can meet.

    An ``OSError`` (``EADDRINUSE``) so that callers handling bind failures in general still do;
    ``hint`` is what the command that chose the port can tell its user to pass instead.
    """

    def __init__(self, addr: str, hint: str = "") -> None:
        super().__init__(errno.EADDRINUSE, f"{addr} is in use")
        self.addr = addr
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.addr} is in use"

    @classmethod
    def check(cls, exc: OSError, host: str, port: int) -> OSError:
        """``exc`` as an AddressInUseError when it is one (asyncio reports it as a bare OSError)."""
        if exc.errno == errno.EADDRINUSE or getattr(exc, "winerror", None) == 10048:
            return cls(f"{host or '0.0.0.0'}:{port}")
        return exc
