"""``RemotingCommand``: one request or response of RocketMQ's remoting protocol.

Plain data with ``__slots__``: a broker builds and parses tens of thousands of these a second,
so construction is kept to attribute stores. Framing and header encodings live in
``remoting.frame`` and ``remoting.serializer``; this module knows nothing of bytes on the wire.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, TypeVar

from rocketmq_py.remoting.codes import CURRENT_VERSION, LanguageCode, ResponseCode, SerializeType

if TYPE_CHECKING:
    from rocketmq_py.remoting.header import CommandHeader

    H = TypeVar("H", bound=CommandHeader)

# Flag bits (docs/protocol.md#flag-and-opaque): bit 0 marks a response, bit 1 a oneway request.
RPC_TYPE_RESPONSE = 0x1
RPC_ONEWAY = 0x2

# Java keeps one process-wide opaque counter; we mask to 31 bits so ids stay positive and
# never collide with a wrapped negative id from the same process.
_opaque_counter = itertools.count(1)

# Java servers answer with language JAVA; some tools display it, none should see a surprise.
_JAVA = int(LanguageCode.JAVA)


def next_opaque() -> int:
    return next(_opaque_counter) & 0x7FFFFFFF


class RemotingCommand:
    __slots__ = ("body", "code", "ext_fields", "flag", "language", "opaque", "remark",
                 "serialize_type", "version")

    def __init__(
        self,
        code: int,
        opaque: int = 0,
        flag: int = 0,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: bytes | None = None,
        language: int = LanguageCode.PYTHON,
        version: int = CURRENT_VERSION,
        serialize_type: int = SerializeType.JSON,
    ) -> None:
        self.code = code
        self.language = language
        self.version = version
        self.opaque = opaque
        self.flag = flag
        self.remark = remark
        self.ext_fields = ext_fields
        self.body = body
        self.serialize_type = serialize_type

    # -- construction -------------------------------------------------------------------

    @classmethod
    def request(
        cls,
        code: int,
        header: CommandHeader | dict[str, str] | None = None,
        body: bytes | None = None,
        *,
        serialize_type: int = SerializeType.JSON,
        language: int = LanguageCode.PYTHON,
    ) -> RemotingCommand:
        """A two-way request with a fresh opaque; a typed header is written into extFields."""
        ext = header.to_ext_fields() if header is not None and not isinstance(header, dict) else header
        return cls(code, next_opaque(), 0, None, ext, body, language, CURRENT_VERSION, serialize_type)

    def response(
        self,
        code: int = ResponseCode.SUCCESS,
        remark: str | None = None,
        header: CommandHeader | dict[str, str] | None = None,
        body: bytes | None = None,
    ) -> RemotingCommand:
        """The response to this request: same opaque, response flag, the request's serialization
        (old C++ clients cannot read any other, docs/protocol.md#frame-layout)."""
        ext = header.to_ext_fields() if header is not None and not isinstance(header, dict) else header
        # Positional arguments: this runs once per request on every daemon's hot path.
        return RemotingCommand(code, self.opaque, RPC_TYPE_RESPONSE, remark, ext, body, _JAVA,
                               CURRENT_VERSION, self.serialize_type)

    # -- flags ----------------------------------------------------------------------------

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RPC_TYPE_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & RPC_ONEWAY)

    def mark_oneway(self) -> RemotingCommand:
        self.flag |= RPC_ONEWAY
        return self

    # -- headers --------------------------------------------------------------------------

    def decode_header(self, header_cls: type[H]) -> H:
        """Read a typed header out of extFields; raises ``HeaderError`` naming what is wrong."""
        return header_cls.from_ext_fields(self.ext_fields or {})

    def __repr__(self) -> str:
        kind = "response" if self.is_response else ("oneway" if self.is_oneway else "request")
        body = len(self.body) if self.body else 0
        return (f"RemotingCommand({kind} code={self.code} opaque={self.opaque} flag={self.flag} "
                f"remark={self.remark!r} ext={self.ext_fields!r} body={body}B "
                f"serialize={self.serialize_type})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RemotingCommand):
            return NotImplemented
        return self._fields() == other._fields()

    def _fields(self) -> tuple[object, ...]:
        # every field by name, not through __slots__: the mypyc build's class has none
        return (self.body, self.code, self.ext_fields, self.flag, self.language, self.opaque, self.remark,
                self.serialize_type, self.version)

    # type-ignored: mutable and compared by value: unhashable, as a dataclass with eq would be
    __hash__ = None  # type: ignore[assignment]
