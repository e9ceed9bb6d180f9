"""Refusals made visible: a WARN line for each request a daemon answers with SYSTEM_ERROR.

A client whose requests are refused (a heartbeat body the broker cannot read, a header missing a
field) sees only the answer's remark, often swallowed in its own log; the operator of the daemon
must see it too, with who sent it, which request and why. A client that repeats the request
every few seconds must not flood the log, so each (request code, remote address) logs at most
once per interval, and the next line after a quiet spell says how many were left out.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

# One line per (code, address) per minute: a heartbeat refused every 30 s logs every other one.
DEFAULT_INTERVAL = 60.0
# Keys remembered at most; a client reconnecting from new ports must not make the table grow
# without bound. When full, keys quiet for a whole interval are forgotten first, then the oldest.
DEFAULT_MAX_KEYS = 4096


class RefusalLog:
    """Rate-limited WARN lines for refused requests, keyed by (request code, remote address)."""

    def __init__(self, logger: logging.Logger, interval: float = DEFAULT_INTERVAL,
                 max_keys: int = DEFAULT_MAX_KEYS, clock: Callable[[], float] = time.monotonic) -> None:
        self._log = logger
        self._interval = interval
        self._max_keys = max_keys
        self._clock = clock
        # (code, address) -> [time of the last line written, refusals left out since]
        self._seen: dict[tuple[int, str], list[float]] = {}

    def refused(self, remote_addr: str, code: int, reason: str | None) -> bool:
        """Note one refusal; True when a line was written for it."""
        key = (code, remote_addr)
        now = self._clock()
        entry = self._seen.get(key)
        if entry is not None and now - entry[0] < self._interval:
            entry[1] += 1
            return False
        suppressed = int(entry[1]) if entry is not None else 0
        if entry is None and len(self._seen) >= self._max_keys:
            self._evict(now)
        self._seen[key] = [now, 0]
        more = f" ({suppressed} more refused since the last line)" if suppressed else ""
        self._log.warning("refused request code %s from %s: %s%s", code, remote_addr, reason or "(no remark)", more)
        return True

    def _evict(self, now: float) -> None:
        stale = [k for k, (at, _) in self._seen.items() if now - at >= self._interval]
        for k in stale:
            del self._seen[k]
        while len(self._seen) >= self._max_keys:
            del self._seen[next(iter(self._seen))]
