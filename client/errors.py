"""SDK errors: a small hierarchy carrying RocketMQ's response code and remark where there is one."""

from __future__ import annotations


class MQClientError(Exception):
    """Base of every SDK error. ``code`` is RocketMQ's response code when a server answered."""

    def __init__(self, message: str, code: int | None = None, remark: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.remark = remark


class MQBrokerError(MQClientError):
    """A broker answered with an error code."""

    def __init__(self, code: int, remark: str | None, addr: str) -> None:
        super().__init__(f"CODE: {code} DESC: {remark} (broker {addr})", code, remark)
        self.addr = addr


class NoRouteError(MQClientError):
    """No NameServer knows a route for the topic."""


class MessageValidationError(MQClientError):
    """The message cannot be sent as it is (empty, too large, bad topic...): nothing was sent."""


class ClientStateError(MQClientError):
    """The producer or consumer is not started, or already shut down."""
