"""Failures of a daemon's start-up that are no layer's own: an address to listen on that another
process holds, met by the remoting listener and the metrics exporter alike."""

from __future__ import annotations

import errno


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
