"""ACL's signing half, shared by clients and the servers that check them (docs/acl.md).

RocketMQ 4.9's plain ACL authenticates each request by an HMAC over the request itself: the
client adds ``AccessKey`` (and ``SecurityToken`` when it has one) to the extFields, then
``Signature`` = Base64(HmacSHA1(secretKey, content)), where the content is the values of every
extField but ``Signature``, ordered by key, concatenated and UTF-8 encoded, followed by the body
(``AclUtils.combineRequestContent``). The server recomputes it over the fields it received, so
both ends must build the content by this one function.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping

from rocketmq_py.acl.session_credentials import ACCESS_KEY, SECURITY_TOKEN, SIGNATURE, SessionCredentials
from rocketmq_py.remoting.command import RemotingCommand

# MixAll.UNIQUE_MSG_QUERY_FLAG: a query-message flag the broker leaves out of the content.
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"


def combine_request_content(fields: Mapping[str, str], body: bytes | None, *,
                            skip: frozenset[str] = frozenset((SIGNATURE,))) -> bytes:
    """The bytes a signature covers: ``fields``' values but those in ``skip``, ordered by key
    (Java's TreeMap: keys are ASCII, so code-point order is Java's order), then the body."""
    text = "".join(fields[k] for k in sorted(fields) if k not in skip)
    data = text.encode("utf-8")
    return data + body if body else data


def cal_signature(data: bytes, secret_key: str) -> str:
    """Base64(HmacSHA1(secret_key, data)), as ``AclSigner.calSignature``."""
    mac = hmac.new(secret_key.encode("utf-8"), data, hashlib.sha1).digest()
    return base64.b64encode(mac).decode("ascii")


def sign_request(request: RemotingCommand, credentials: SessionCredentials) -> None:
    """Add AccessKey, SecurityToken (when set) and Signature to ``request``'s extFields."""
    ext = request.ext_fields
    if ext is None:
        ext = request.ext_fields = {}
    ext[ACCESS_KEY] = credentials.access_key
    if credentials.security_token is not None:
        ext[SECURITY_TOKEN] = credentials.security_token
    ext[SIGNATURE] = cal_signature(combine_request_content(ext, request.body), credentials.secret_key)


class AclClientRPCHook:
    """The RPC hook that signs every request a client writes (Java's ``AclClientRPCHook``)."""

    def __init__(self, credentials: SessionCredentials) -> None:
        self.credentials = credentials

    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        sign_request(request, self.credentials)

    def do_after_response(self, remote_addr: str, request: RemotingCommand,
                          response: RemotingCommand | None) -> None:
        return None
