"""AclException: why a request or an ACL file was refused, in Java's words."""

from __future__ import annotations


class AclException(ValueError):
    """A refusal by the plain ACL; its message is the remark the client reads. A ValueError: an
    ACL file refused at start-up is a bad input, reported as one line by the daemons' CLIs."""
