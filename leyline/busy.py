"""A read the server is too busy for (429, ``Retry-After``): how long a client waits before it asks again, and how
many times it does before it shows the refusal. The console and ``nissa.Api`` follow this one rule."""

from __future__ import annotations

BUSY_RETRIES = 5
"""Times a read answered 429 is asked again before its refusal is shown."""
MAX_RETRY_AFTER_S = 30.0
"""The longest wait a 429's ``Retry-After`` is followed for."""


def retry_after_s(header: str | None) -> float:
    """Seconds a 429 asks to wait: its ``Retry-After`` in seconds (1 where missing or not a number; an HTTP date is
    not sent by nissa-server), from 0 to ``MAX_RETRY_AFTER_S``."""
    try:
        seconds = float(header if header is not None else "1")
    except ValueError:
        return 1.0
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S) if seconds == seconds else 1.0
