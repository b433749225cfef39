"""How the hub's sender paces itself: events gathered into frames, and the delay between reconnect attempts."""

from __future__ import annotations

import collections
import random
import time
from collections.abc import Callable

from nissa.hub.config import BackoffConfig


class Gathering:
    """Lets logged events gather into one frame. A frame goes out once ``batch_events`` are waiting; else
    ``linger_s`` after the first of them was seen, unless ``PIPELINE`` frames sent are still unacknowledged:
    then once an ack comes, or ``hold_s`` after the first was seen. The server's cost is mostly per frame:
    a steady trickle goes out as a few larger frames a second, and a server slow to acknowledge (saturated)
    gets fewer, larger frames still, instead of a growing queue of small ones."""

    PIPELINE = 2
    """Frames in flight before new events wait for an ack: one being committed, one queued behind it."""

    def __init__(self, batch_events: int, linger_s: float, hold_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._batch, self._linger, self._hold = batch_events, linger_s, max(linger_s, hold_s)
        self._clock = clock
        self._since: float | None = None
        self._ends: collections.deque[int] = collections.deque()

    def wait_s(self, waiting: int, acked: int) -> float:
        """How long to wait before sending ``waiting`` events, with seqs up to ``acked`` acknowledged;
        0: send now (and say so with ``sent``)."""
        now = self._clock()
        if self._since is None:
            self._since = now
        ends = self._ends
        while ends and ends[0] <= acked:
            ends.popleft()
        left = self._since + (self._hold if len(ends) >= self.PIPELINE else self._linger) - now
        return 0.0 if waiting >= self._batch or left <= 0 else left

    def sent(self, last_seq: int) -> None:
        """A frame up to ``last_seq`` went out; the next one gathers afresh."""
        self._since = None
        self._ends.append(last_seq)


def backoff_delay(cfg: BackoffConfig, failures: int, rng: random.Random) -> float:
    """Delay before attempt ``failures + 1``: exponential, capped, jittered downwards."""
    delay = min(cfg.max_s, cfg.initial_s * cfg.factor ** min(failures, 64))
    return delay * (1.0 - cfg.jitter * rng.random())
