"""Whether the server is saturated, so that watchers yield to ingest before any trainer is hurt.

Saturated: the store's writer has a backlog (a quarter of its queue or more), or the event loop runs its
timers late. While it is, each watcher's sender lets live events gather before it sends (in fewer, larger
frames); a watcher that still falls too far behind is closed as lagging and resumes from its cursor.
Trainers' frames, acks, keepalives and requests get the loop time the watchers leave.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from prometheus_client import Histogram

LATE_S = 0.25
"""A loop that runs a timer this late is saturated."""
WATCH_YIELD_S = 0.05
"""While saturated, a watcher's sender waits this long before each send."""


class Pressure:
    def __init__(self, backlog: Callable[[], int], capacity: int, lag: Histogram) -> None:
        self._backlog, self._capacity, self._lag_histogram = backlog, capacity, lag
        self.lag = 0.0
        """How late the event loop ran the last timer of ``watch_loop``, in seconds."""

    @property
    def saturated(self) -> bool:
        return self.lag >= LATE_S or self._backlog() * 4 >= self._capacity

    async def watch_loop(self, every_s: float = 0.1) -> None:
        """Measure, every ``every_s``, how much later than asked the loop wakes a sleeper: what every
        connection's keepalive, ack and request waits on when the server is busy."""
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + every_s
            await asyncio.sleep(every_s)
            self.lag = max(0.0, loop.time() - due)
            self._lag_histogram.observe(self.lag)
