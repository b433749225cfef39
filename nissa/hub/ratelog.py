"""Rate-limited logging for paths that may fail thousands of times a second."""

from __future__ import annotations

import logging
import threading
import time


class RateLimitedLog:
    """Logs each key at most once per ``interval_s``, saying how many were held back since."""

    def __init__(self, logger: logging.Logger, interval_s: float = 10.0) -> None:
        self._logger = logger
        self._interval = interval_s
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}
        self._lock = threading.Lock()

    def log(self, level: int, key: str, msg: str, *args: object) -> bool:
        """Log ``msg % args`` unless ``key`` was logged within the interval; True when it was logged."""
        now = time.monotonic()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self._interval:
                self._held[key] = self._held.get(key, 0) + 1
                return False
            self._last[key] = now
            held = self._held.pop(key, 0)
        if held:
            self._logger.log(level, msg + " (%d similar messages held back)", *args, held)
        else:
            self._logger.log(level, msg, *args)
        return True

    def warning(self, key: str, msg: str, *args: object) -> bool:
        return self.log(logging.WARNING, key, msg, *args)

    def reset_after_fork(self) -> None:
        """A fresh lock: the parent's may have been held by another thread at fork time."""
        self._lock = threading.Lock()
