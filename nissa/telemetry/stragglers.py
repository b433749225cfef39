"""The straggler check: which rank is slow, compared every epoch.

Fed with every rank's training step time at each exchange of the ranks (``nissa.control.agreement``).
A rank whose step time is over ``factor`` times the median of the other ranks', and over it by at least
``min_excess_s``, is slow (the others': with two ranks the median of all would be their mean, which a slow
rank drags up itself; the excess: steps of a few milliseconds on shared cores differ by the operating
system's time slices, a rank descheduled once more than the other, which is no slow rank). Step times
on shared machines jitter, so one slow epoch is not a straggler: a rank is reported once it has been
slow ``epochs`` exchanges running (an ``anomaly_detected`` of kind ``straggler`` naming it, with its
step time and the median), once, until it catches up, which takes as many exchanges running under the
lower ``recovered`` ratio (hysteresis: a rank hovering about the factor is not reported again and
again). It never opens a DEBUG window: more telemetry on a slow rank would only slow it down further.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from leyline import AnomalyDetected

STRAGGLER = "straggler"


@dataclass(frozen=True)
class StragglerConfig:
    """When a rank counts as a straggler, and when as caught up."""

    factor: float = 1.5
    """Step time over this many times the other ranks' median is slow (``--straggler-factor``)."""
    epochs: int = 3
    """Exchanges running a rank must be slow to be reported, and back under ``recovered`` to count as caught
    up (``--straggler-epochs``)."""
    min_excess_s: float = 0.025
    """A slow rank's step time is also over the others' median by at least this much (about one scheduling
    period of a Linux machine, 24 ms: below it the difference is the time slices of cores shared with other
    work). 0: the factor alone decides."""

    def __post_init__(self) -> None:
        if not self.factor > 1:
            raise ValueError(f"--straggler-factor: must be > 1, got {self.factor}")
        if self.epochs < 1:
            raise ValueError(f"--straggler-epochs: must be an integer >= 1, got {self.epochs}")
        if not self.min_excess_s >= 0:
            raise ValueError(f"StragglerConfig.min_excess_s: must be >= 0 seconds, got {self.min_excess_s}")

    @property
    def recovered(self) -> float:
        """The ratio under which a reported rank counts as catching up: halfway from 1 to ``factor``."""
        return 1 + (self.factor - 1) / 2


@dataclass
class _Rank:
    reported: bool = False
    running: int = 0
    """Exchanges running slow (not reported yet) or recovered (reported)."""


class StragglerCheck:
    """Compares the ranks' step times; see the module docstring."""

    def __init__(self, config: StragglerConfig | None = None) -> None:
        self.config = config or StragglerConfig()
        self._ranks: dict[int, _Rank] = {}

    def run(self, step_times: Sequence[float | None]) -> list[AnomalyDetected]:
        """One exchange's step times, by rank (None: not measured); returns the ranks that became stragglers."""
        measured = {rank: t for rank, t in enumerate(step_times) if t is not None and t > 0}
        if len(measured) < 2:
            return []
        found = []
        for rank, t in sorted(measured.items()):
            median = statistics.median(v for r, v in measured.items() if r != rank)
            over_floor = t - median >= self.config.min_excess_s
            if self._observe(self._ranks.setdefault(rank, _Rank()), t / median, over_floor):
                found.append(self._anomaly(rank, t, median))
        return found

    def _observe(self, state: _Rank, ratio: float, over_floor: bool) -> bool:
        """Counts the exchanges running that move ``state`` on (``over_floor``: slower than the others by at
        least ``min_excess_s``); True when it becomes a straggler."""
        cfg = self.config
        moving = ratio <= cfg.recovered if state.reported else ratio > cfg.factor and over_floor
        state.running = state.running + 1 if moving else 0
        if state.running < cfg.epochs:
            return False
        state.reported, state.running = not state.reported, 0
        return state.reported

    def _anomaly(self, rank: int, t: float, median: float) -> AnomalyDetected:
        n = self.config.epochs
        return AnomalyDetected(
            anomaly=STRAGGLER, rank=rank,
            detail=f"rank {rank} is a straggler: {t * 1e3:.1f} ms a step, {t / median:.1f}× the other ranks' "
                   f"median {median * 1e3:.1f} ms" + (f" ({n} epochs running over {self.config.factor:g}×)"
                                                      if n > 1 else ""),
            evidence={"rank": float(rank), "step_ms": t * 1e3, "median_ms": median * 1e3,
                      "threshold": self.config.factor, "epochs": float(n)})
