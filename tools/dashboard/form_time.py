"""Times typed into the console's forms: a browser's datetime-local value, epoch millis or now."""

from __future__ import annotations

import time
from datetime import datetime


def parse_form_time(text: str, name: str) -> int:
    """Epoch millis of ``text`` (local time for a datetime-local value, as the browser shows it)."""
    text = text.strip()
    if text == "now":
        return int(time.time() * 1000)
    if text.isdigit():
        return int(text)
    try:
        return int(datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise ValueError(f"{name}: {text!r} is not a time (use the date picker, epoch millis or now)") from None
