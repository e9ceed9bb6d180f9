"""MQVersion's names: the ``version`` a client sends in every request is the position of its
release in Java's MQVersion.Version enum (docs/metrics.md lists the order), which tools and
metrics print by name (``V4_9_8``)."""

from __future__ import annotations


def version_desc(version: int) -> str:
    """MQVersion.getVersionDesc: the enum's order is its numbering (docs/metrics.md)."""
    names = _version_names()
    return names[version] if 0 <= version < len(names) else names[-1]


_NAMES: list[str] = []


def _version_names() -> list[str]:
    if not _NAMES:
        _NAMES.extend(["V3_0_0_SNAPSHOT", "V3_0_0_ALPHA1", *(f"V3_0_0_BETA{i}" for i in (1, 2, 3, 4, 5))])
        for i in (6, 7, 8, 9):
            _NAMES.extend([f"V3_0_0_BETA{i}_SNAPSHOT", f"V3_0_0_BETA{i}"])
        _NAMES.append("V3_0_0_FINAL")
        releases = [(3, 0, p) for p in range(1, 16)] + [(3, m, p) for m in (1, 2) for p in range(10)]
        releases += [(3, m, p) for m in range(3, 10) for p in range(1, 10)]
        releases += [(major, m, p) for major in (4, 5) for m in range(10) for p in range(10)]
        for major, minor, patch in releases:
            _NAMES.extend([f"V{major}_{minor}_{patch}_SNAPSHOT", f"V{major}_{minor}_{patch}"])
    return _NAMES
