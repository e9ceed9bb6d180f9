"""White-listed remote addresses, in the forms plain_acl.yml accepts (RemoteAddressStrategyFactory).

- blank: matches nothing; ``*``, ``*.*.*.*`` or ``*:*:*:*:*:*:*:*``: matches everything;
- one address (IPv4 or IPv6): that address;
- a list ``192.168.0.1,192.168.0.2`` or ``192.168.1.{1,2,3}``: any of them;
- a range on one part, later parts ``*``: ``192.168.*.*``, ``192.168.1.1-100``, ``10.10.103.*``,
  ``1050:0:0:0:5:600:300c:*``.
A pattern in no such form refuses the file with the address named.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from rocketmq_py.acl.acl_exception import AclException

AddressMatcher = Callable[[str], bool]

_ALL = frozenset({"*", "*.*.*.*", "*:*:*:*:*:*:*:*"})


def _bad(pattern: str) -> AclException:
    return AclException(f"Netaddress examine Exception netaddress is {pattern}")


def _one(address: str, pattern: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    try:
        return ipaddress.ip_address(address.strip())
    except ValueError:
        raise _bad(pattern) from None


def _parse_remote(remote: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        addr = ipaddress.ip_address(remote.strip("[]"))
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped  # a dual-stack socket's view of an IPv4 peer
    return addr


def _set_matcher(addresses: set[ipaddress.IPv4Address | ipaddress.IPv6Address]) -> AddressMatcher:
    return lambda remote: _parse_remote(remote) in addresses


def _range_part(part: str, maximum: int, base: int, pattern: str) -> tuple[int, int] | None:
    """The bounds a ``*`` or ``a-b`` part allows; None for a plain number."""
    if part == "*":
        return 0, maximum
    if "-" in part:
        lo, sep, hi = part.partition("-")
        try:
            start, end = int(lo, base), int(hi, base)
        except ValueError:
            raise _bad(pattern) from None
        if not (sep and 0 <= start <= end <= maximum):
            raise AclException(
                f"RangeRemoteAddressStrategy netaddress examine scope Exception start is {lo} , end is {hi}")
        return start, end
    return None


def _range_matcher(pattern: str) -> AddressMatcher:
    v6 = ":" in pattern
    parts = _expand_v6(pattern) if v6 else pattern.split(".")
    if len(parts) != (8 if v6 else 4):
        raise _bad(pattern)
    maximum, base = (0xFFFF, 16) if v6 else (255, 10)
    ranges = [(i, b) for i, p in enumerate(parts) if (b := _range_part(p.strip(), maximum, base, pattern))]
    if not ranges:
        raise _bad(pattern)
    index, bounds = ranges[0]
    if index == 0 or any(p.strip() != "*" for p in parts[index + 1:]):
        raise _bad(pattern)
    try:
        head = [int(p, base) for p in parts[:index]]
    except ValueError:
        raise _bad(pattern) from None
    if any(not 0 <= h <= maximum for h in head):
        raise _bad(pattern)
    start, end = bounds

    def match(remote: str) -> bool:
        addr = _parse_remote(remote)
        if addr is None or isinstance(addr, ipaddress.IPv6Address) != v6:
            return False
        values = ([int(h, 16) for h in addr.exploded.split(":")] if v6
                  else list(addr.packed))
        return values[:index] == head and start <= values[index] <= end

    return match


def _expand_v6(pattern: str) -> list[str]:
    """An IPv6 pattern's eight parts, ``::`` filled with zeros."""
    if "::" in pattern:
        left, _, right = pattern.partition("::")
        lparts = left.split(":") if left else []
        rparts = right.split(":") if right else []
        return lparts + ["0"] * (8 - len(lparts) - len(rparts)) + rparts
    return pattern.split(":")


def remote_address_matcher(pattern: str | None) -> AddressMatcher:
    """The matcher for one whiteRemoteAddress / globalWhiteRemoteAddresses entry."""
    if pattern is None or not pattern.strip():
        return lambda remote: False
    pattern = pattern.strip()
    if pattern in _ALL:
        return lambda remote: True
    if pattern.endswith("}"):
        head, brace, tail = pattern.partition("{")
        if not brace or not head or head[-1] not in ".:":
            raise _bad(pattern)
        return _set_matcher({_one(head + item, pattern) for item in tail[:-1].split(",") if item.strip()})
    if "," in pattern:
        return _set_matcher({_one(item, pattern) for item in pattern.split(",") if item.strip()})
    if "*" in pattern or "-" in pattern:
        return _range_matcher(pattern)
    return _set_matcher({_one(pattern, pattern)})
