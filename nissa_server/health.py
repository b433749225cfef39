"""What of the server works now: each part (the database, each background task) is well or degraded, with
the reason; and the one loop every background task runs in, which outlives any failure.

A part that fails says so once (one log line when it goes wrong, one when it is well again, however many
tries it takes in between), shows as degraded in ``GET /healthz`` and in ``nissa_degraded`` on ``/metrics``
meanwhile, and is tried again after a backoff: a database restart ends nothing for good.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass

logger = logging.getLogger(__name__)

RETRY_S = 0.5
"""A failed step of a background task is tried again after this long, doubling each time it fails again."""


def reason_of(err: BaseException) -> str:
    """One line: the error's type and the first line of its message."""
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__


@dataclass
class Trouble:
    """A part that is degraded: since when, why (its first failure's reason), how many failures so far."""

    since: float
    reason: str
    failures: int = 1


class Health:
    """The parts of one server and which are degraded. Thread-safe: reads and the PostgreSQL listener report
    from worker threads."""

    def __init__(self, expected: tuple[type[BaseException], ...] = (), clock: Callable[[], float] = time.time) -> None:
        self.expected = expected
        """Failures that are the database's, not a bug: logged without a traceback."""
        self._clock = clock
        self._parts: set[str] = set()
        self._down: dict[str, Trouble] = {}
        self._lock = threading.Lock()

    def watch(self, part: str) -> None:
        """``part`` is one of this server's (``/metrics`` shows it as 0 until it fails)."""
        self._parts.add(part)

    @property
    def parts(self) -> list[str]:
        return sorted(self._parts | set(self._down))

    def failed(self, part: str, err: BaseException) -> int:
        """``part`` failed with ``err`` (logged if it was well until now); returns its failures in a row."""
        with self._lock:
            trouble = self._down.get(part)
            if trouble is not None:
                trouble.failures += 1
                return trouble.failures
            self._down[part] = Trouble(since=self._clock(), reason=reason_of(err))
        expected = isinstance(err, self.expected)
        logger.warning("%s degraded: %s (tried again until it works; logged again once it does)", part,
                       reason_of(err), exc_info=None if expected else err)
        return 1

    def ok(self, part: str) -> None:
        """``part`` worked: logged if it was degraded until now."""
        if part not in self._down:  # the common case, without the lock
            return
        with self._lock:
            trouble = self._down.pop(part, None)
        if trouble is not None:
            logger.warning("%s works again after %.1f s and %d failure%s", part, self._clock() - trouble.since,
                           trouble.failures, "" if trouble.failures == 1 else "s")

    def is_down(self, part: str) -> bool:
        return part in self._down

    @property
    def degraded(self) -> dict[str, Trouble]:
        """The parts that are degraded now, by name."""
        with self._lock:
            return dict(sorted(self._down.items()))

    def levels(self) -> Iterator[tuple[str, float]]:
        """(part, 1.0 if degraded else 0.0) for every part, for ``/metrics``."""
        down = self.degraded
        for part in self.parts:
            yield part, 1.0 if part in down else 0.0


def retry_delay(failures: int, max_retry_s: float, retry_s: float = RETRY_S) -> float:
    """How long to wait before trying again after ``failures`` failures in a row: doubling, capped."""
    return min(max_retry_s, retry_s * 2 ** (failures - 1))


async def supervise(health: Health, part: str, step: Callable[[], Awaitable[object]], *, max_retry_s: float,
                    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
    """Run ``step`` again and again (it waits for its own turn: an interval, a wake-up, a notification) for as
    long as the server runs. A step that raises, the database's error or a bug alike, is reported to
    ``health`` (logged once) and tried again after ``retry_delay``. A step that runs for good (a listener)
    says ``health.ok(part)`` itself once it works again."""
    health.watch(part)
    while True:
        try:
            await step()
        except Exception as err:  # noqa: BLE001 - a background task must outlive any failure, the database's or a bug
            await sleep(retry_delay(health.failed(part, err), max_retry_s))
        else:
            health.ok(part)
