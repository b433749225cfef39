"""The straggler check: which rank is slow, compared every epoch.

Fed with every rank's training step time at each exchange of the ranks (``nissa.control.agreement``).
A rank whose step time is over ``factor`` times the median of the other ranks' is a straggler (the others':
with two ranks the median of all would be their mean, which a slow rank drags up itself); the check
reports when a rank starts straggling (an ``anomaly_detected`` of kind ``straggler`` naming it, with its
step time and the median) and re-arms when it catches up, like the per-epoch checks beside it. It never
opens a DEBUG window: more telemetry on a slow rank would only slow it down further.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from leyline import AnomalyDetected

STRAGGLER = "straggler"


@dataclass(frozen=True)
class StragglerConfig:
    """When a rank counts as a straggler."""

    factor: float = 1.5
    """Step time over this many times the ranks' median (``--straggler-factor``)."""

    def __post_init__(self) -> None:
        if not self.factor > 1:
            raise ValueError(f"--straggler-factor: must be > 1, got {self.factor}")


class StragglerCheck:
    """Compares the ranks' step times; see the module docstring."""

    def __init__(self, config: StragglerConfig | None = None) -> None:
        self.config = config or StragglerConfig()
        self._slow: set[int] = set()

    def run(self, step_times: Sequence[float | None]) -> list[AnomalyDetected]:
        """One exchange's step times, by rank (None: not measured); returns the ranks that started straggling."""
        measured = {rank: t for rank, t in enumerate(step_times) if t is not None and t > 0}
        if len(measured) < 2:
            return []
        found = []
        for rank, t in sorted(measured.items()):
            median = statistics.median(v for r, v in measured.items() if r != rank)
            if t <= self.config.factor * median:
                self._slow.discard(rank)
                continue
            if rank in self._slow:
                continue
            self._slow.add(rank)
            found.append(AnomalyDetected(
                anomaly=STRAGGLER, rank=rank,
                detail=f"rank {rank} is a straggler: {t * 1e3:.1f} ms a step, {t / median:.1f}× the other ranks' "
                       f"median {median * 1e3:.1f} ms",
                evidence={"rank": float(rank), "step_ms": t * 1e3, "median_ms": median * 1e3,
                          "threshold": self.config.factor}))
        return found
