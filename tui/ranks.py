"""The ranks of a run as the console follows them, folded from their events: pure bookkeeping, no Textual.

Every event a rank streams says where it is (its step) and when; its hub health says how full its
queue is; its heartbeats that it lives; a ``straggler`` anomaly (reported by rank 0) which rank is slow;
``profile_completed`` events of one window, one per rank, let the slow rank's trace be picked out.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from leyline import AnomalyDetected, Event, Heartbeat, HubHealth, ProfileCompleted, RunStarted

RATE_POINTS = 32
"""(time, step) points kept per rank for its step rate."""


@dataclass
class RankView:
    """One rank: where it is, how fast it goes, how its hub fares."""

    rank: int
    step: int = 0
    epoch: int = 0
    last_ts: float | None = None
    heartbeat_ts: float | None = None
    queue_depth: int | None = None
    dropped: int = 0
    connected: bool | None = None
    straggler: AnomalyDetected | None = None
    straggler_epoch: int = 0
    points: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=RATE_POINTS))

    @property
    def steps_per_s(self) -> float | None:
        if len(self.points) < 2:
            return None
        (t0, s0), (t1, s1) = self.points[0], self.points[-1]
        return (s1 - s0) / (t1 - t0) if t1 > t0 else None


@dataclass(frozen=True)
class RankRow:
    """One line of the ranks panel."""

    rank: int
    steps_per_s: float | None
    lag: int
    """Steps behind the furthest rank."""
    queue_depth: int | None
    heartbeat_age_s: float | None
    straggler: str
    """Why it is marked slow ("" when it is not)."""


class RankTracker:
    """Every rank of one run; ``apply`` returns which parts of the view changed."""

    def __init__(self, max_ranks: int = 256) -> None:
        self.ranks: dict[int, RankView] = {}
        self.world_size = 1
        self.windows: dict[str, dict[int, ProfileCompleted]] = {}
        """Each profile window's completion per rank, the latest window last."""
        self._max = max_ranks

    @property
    def several(self) -> bool:
        return self.world_size > 1 or len(self.ranks) > 1

    def apply(self, event: Event) -> set[str]:
        if event.rank < 0:
            return set()
        view = self.ranks.get(event.rank)
        if view is None:
            if len(self.ranks) >= self._max:
                return set()
            view = self.ranks[event.rank] = RankView(event.rank)
        if event.step >= view.step:
            view.step, view.epoch = event.step, event.epoch
            view.points.append((event.ts, event.step))
        view.last_ts = event.ts
        p = event.payload
        if isinstance(p, RunStarted):
            self.world_size = max(self.world_size, p.world_size)
        elif isinstance(p, Heartbeat):
            view.heartbeat_ts = event.ts
        elif isinstance(p, HubHealth):
            view.queue_depth, view.dropped, view.connected = p.queue_depth, sum(p.dropped.values()), p.connected
        elif isinstance(p, AnomalyDetected) and p.anomaly == "straggler" and p.rank is not None:
            slow = self.ranks.get(p.rank) or self.ranks.setdefault(p.rank, RankView(p.rank))
            slow.straggler, slow.straggler_epoch = p, event.epoch
        elif isinstance(p, ProfileCompleted):
            self.windows.setdefault(p.window, {})[event.rank] = p
            while len(self.windows) > 8:
                self.windows.pop(next(iter(self.windows)))
            return {"ranks", "profile"}
        return {"ranks"}

    def rows(self, now: float | None = None, recent_epochs: int = 5) -> tuple[RankRow, ...]:
        """The panel's rows; a straggler report older than ``recent_epochs`` epochs is shown no more."""
        now = time.time() if now is None else now
        front = max((v.step for v in self.ranks.values()), default=0)
        epoch = max((v.epoch for v in self.ranks.values()), default=0)
        rows = []
        for rank in sorted(self.ranks):
            v = self.ranks[rank]
            slow = ""
            if v.straggler is not None and epoch - v.straggler_epoch < recent_epochs:
                ms = v.straggler.evidence.get("step_ms")
                median = v.straggler.evidence.get("median_ms")
                slow = f"{ms / median:.1f}× median" if ms and median else "straggler"
            beat = v.heartbeat_ts if v.heartbeat_ts is not None else v.last_ts
            rows.append(RankRow(rank, v.steps_per_s, front - v.step, v.queue_depth,
                                None if beat is None else max(0.0, now - beat), slow))
        return tuple(rows)

    def last_window(self) -> tuple[str, dict[int, ProfileCompleted]] | None:
        """The latest profile window completed by some rank, with each rank's completion."""
        if not self.windows:
            return None
        name = next(reversed(self.windows))
        return name, self.windows[name]
