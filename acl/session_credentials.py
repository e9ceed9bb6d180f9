"""An account's keys as a client holds them, and the extField names a signed request carries
(Java's ``SessionCredentials``, docs/acl.md)."""

from __future__ import annotations

from dataclasses import dataclass

# extField names of SessionCredentials (Java's constants).
ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"


@dataclass(frozen=True)
class SessionCredentials:
    """An account's keys as a client holds them (Java's ``SessionCredentials``)."""

    access_key: str
    secret_key: str
    security_token: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.access_key, str) or not self.access_key:
            raise ValueError("access_key must be a non-empty string")
        if not isinstance(self.secret_key, str) or not self.secret_key:
            raise ValueError("secret_key must be a non-empty string")

    def __repr__(self) -> str:
        # The secret never reaches a log line through repr().
        return f"SessionCredentials(access_key={self.access_key!r}, secret_key='***')"
