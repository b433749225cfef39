"""Bias-corrected exponential moving averages of gradient norms, and drift from them.

Drift is ``|x - ema| / max(|ema|, floor)``, measured against the average *before* ``x``
joins it (a value must not dampen its own surprise). The floor keeps drift bounded when
the average approaches zero: with vanishing gradients both ``x`` and the average are
below the floor and drift stays small instead of dividing by almost nothing.
Bias correction (``ema / (1 - momentum**n)``) makes the first averages meaningful instead
of pulled towards the zero the average starts from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class EMAConfig:
    """How fast the averages move and how drift is bounded."""

    momentum: float = 0.9
    """Weight of the past in each update, in [0, 1)."""
    floor: float = 1e-6
    """Smallest denominator of a relative drift."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1), got {self.momentum}")
        if not self.floor > 0.0:
            raise ValueError(f"floor must be > 0, got {self.floor}")


class BiasCorrectedEMA:
    """One series' bias-corrected EMA; non-finite values are refused, never averaged in."""

    def __init__(self, config: EMAConfig | None = None) -> None:
        self.config = config or EMAConfig()
        self._raw = 0.0
        self._count = 0

    @property
    def count(self) -> int:
        return self._count

    @property
    def value(self) -> float | None:
        """The corrected average, None before the first value."""
        if self._count == 0:
            return None
        return self._raw / (1.0 - self.config.momentum ** self._count)

    def drift(self, x: float) -> float | None:
        """Relative distance of ``x`` from the average so far; None before any value or for NaN/Inf."""
        mean = self.value
        if mean is None or not math.isfinite(x):
            return None
        return abs(x - mean) / max(abs(mean), self.config.floor)

    def update(self, x: float) -> bool:
        """Add ``x``; returns False (and changes nothing) when ``x`` is not finite."""
        if not math.isfinite(x):
            return False
        m = self.config.momentum
        self._raw = m * self._raw + (1.0 - m) * x
        self._count += 1
        return True

    def state_dict(self) -> dict[str, float | int]:
        return {"raw": self._raw, "count": self._count}

    def load_state_dict(self, state: dict[str, float | int]) -> None:
        self._raw = float(state["raw"])
        self._count = int(state["count"])


@dataclass(frozen=True)
class Drift:
    """One update of a tracker: the average with the new value in, and its drift from the average before."""

    ema_norm: float | None
    drift: float | None
    updates: int


class GradientEMATracker:
    """Per-scope bias-corrected EMA of the global gradient norm, with drift."""

    def __init__(self, config: EMAConfig | None = None) -> None:
        self.config = config or EMAConfig()
        self._series: dict[str, BiasCorrectedEMA] = {}

    def update(self, scope: str, norm: float | None) -> Drift:
        """Measure ``norm``'s drift against ``scope``'s average, then fold it in."""
        ema = self._series.setdefault(scope, BiasCorrectedEMA(self.config))
        if norm is None:
            return Drift(ema_norm=ema.value, drift=None, updates=ema.count)
        drift = ema.drift(norm)
        ema.update(norm)
        return Drift(ema_norm=ema.value, drift=drift, updates=ema.count)

    def value(self, scope: str) -> float | None:
        ema = self._series.get(scope)
        return ema.value if ema is not None else None

    def forget(self, scope: str) -> None:
        """Drop a scope's history (its seed was pruned; a new seed starts afresh)."""
        self._series.pop(scope, None)

    def state_dict(self) -> dict[str, object]:
        return {"momentum": self.config.momentum, "floor": self.config.floor,
                "series": {scope: ema.state_dict() for scope, ema in self._series.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:  # as a checkpoint read it back
        self.config = EMAConfig(momentum=float(state["momentum"]), floor=float(state["floor"]))
        series = state["series"]
        if not isinstance(series, dict):
            raise TypeError(f"'series' must be a dict, got {type(series).__name__}")
        self._series = {}
        for scope, s in series.items():
            ema = BiasCorrectedEMA(self.config)
            ema.load_state_dict(s)
            self._series[scope] = ema
