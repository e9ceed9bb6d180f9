"""Message bodies of the interop scenarios, shared by the client subprocess and the test that
checks what arrived: ASCII only, since the C++ client hands bodies back as C strings."""

from __future__ import annotations

import hashlib
import random
import string
from typing import Any


def body_of(spec: dict[str, Any]) -> bytes:
    """The text given, or ``size`` seeded random letters and digits (compressible, as text is,
    yet not trivially so)."""
    if "body" in spec:
        return str(spec["body"]).encode()
    rng = random.Random(spec.get("seed", 0))
    return "".join(rng.choices(string.ascii_letters + string.digits, k=spec["size"])).encode()


def digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()[:16]
