"""Signatures as RocketMQ 4.9 computes them (AclClientRPCHook, AclUtils.combineRequestContent).

The expected values were computed outside Python from the algorithm's definition:
``printf '<content>' | openssl dgst -sha1 -hmac '<secret>' -binary | base64``, the content
being the extField values ordered by key (Signature left out) followed by the body.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketmq_py.acl.acl_client_rpc_hook import AclClientRPCHook, cal_signature, combine_request_content, sign_request
from rocketmq_py.acl.session_credentials import ACCESS_KEY, SECURITY_TOKEN, SIGNATURE, SessionCredentials
from rocketmq_py.remoting.command import RemotingCommand


def test_golden_send_v2() -> None:
    request = RemotingCommand.request(310, {"b": "TopicTest", "a": "G"}, b"hello")
    sign_request(request, SessionCredentials("RocketMQ", "12345678"))
    assert request.ext_fields is not None
    assert request.ext_fields[ACCESS_KEY] == "RocketMQ"
    # content: AccessKey < a < b (upper case sorts first) -> "RocketMQ" "G" "TopicTest" + body
    assert request.ext_fields[SIGNATURE] == "lk7R6XUiDdt3vIyVfC+EfUfxYF0="


def test_golden_security_token() -> None:
    request = RemotingCommand.request(11, {"queueId": "0"}, b"x")
    AclClientRPCHook(SessionCredentials("RocketMQ", "secret-key-1", "TOKEN")).do_before_request("addr", request)
    assert request.ext_fields is not None
    assert request.ext_fields[SECURITY_TOKEN] == "TOKEN"
    assert request.ext_fields[SIGNATURE] == "geHKbuUmIqeVIHjVnHPBN5+x46g="


def test_golden_utf8_and_no_body() -> None:
    request = RemotingCommand.request(12, {"topic": "主题"})
    sign_request(request, SessionCredentials("ak-123456", "sk-123456"))
    assert request.ext_fields is not None and request.ext_fields[SIGNATURE] == "xFDqQcRGHrKhqmuhCflxzvgrUtg="


def test_empty_content() -> None:
    assert cal_signature(b"", "abcdefgh") == "f2RF6dOE63S/rJ8NlOEYPvDgmC8="


def test_request_without_ext_fields_gets_them() -> None:
    request = RemotingCommand.request(34)
    sign_request(request, SessionCredentials("RocketMQ", "12345678"))
    assert request.ext_fields is not None
    assert request.ext_fields[SIGNATURE] == cal_signature(b"RocketMQ", "12345678")


@given(st.dictionaries(st.text(min_size=1), st.text()), st.binary(), st.text(min_size=1))
def test_resigning_ignores_old_signature(fields: dict[str, str], body: bytes, secret: str) -> None:
    """A request signed twice (a retry) carries the signature of its content, not of its old
    signature: the server, which leaves Signature out, computes the same."""
    fields.pop(SIGNATURE, None)
    request = RemotingCommand.request(10, dict(fields), body)
    creds = SessionCredentials("account1", secret)
    sign_request(request, creds)
    first = dict(request.ext_fields or {})
    sign_request(request, creds)
    assert request.ext_fields == first
    server_side = combine_request_content(request.ext_fields or {}, body)
    assert cal_signature(server_side, secret) == first[SIGNATURE]


def test_credentials_checked_and_secret_hidden() -> None:
    with pytest.raises(ValueError, match="access_key"):
        SessionCredentials("", "x")
    with pytest.raises(ValueError, match="secret_key"):
        SessionCredentials("ak", "")
    assert "12345678" not in repr(SessionCredentials("RocketMQ", "12345678"))
