"""RPCHook: code run around every request, on both ends (Java's ``remoting/RPCHook``).

A client calls its hooks before writing a request and on its answer (AclClientRPCHook signs
there). A server's processor table calls its hooks before a request's processor and on the answer
it writes: the ACL check (PlainAccessValidator) and the rpc latency of the metrics are hooks. A
table without hooks checks its empty list once per request and calls nothing.
"""

from __future__ import annotations

from typing import Protocol

from rocketmq_py.remoting.command import RemotingCommand


class RPCHook(Protocol):
    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> RemotingCommand | None:
        """None lets the request through; on a server, a command is the refusal answered instead
        and the processor never runs (Java's hook throws, and the exception is the answer). A
        client ignores what its hooks return."""

    def do_after_response(self, remote_addr: str, request: RemotingCommand,
                          response: RemotingCommand | None) -> None:
        """The answer to a request whose hooks' ``do_before_request`` ran; on a server, None for
        a oneway request and for a pull the broker holds (long polling), which is answered
        later outside the table."""
