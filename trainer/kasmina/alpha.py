"""The alpha controller: moves a seed's blend weight toward a target along a curve, one tick per epoch."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass


class AlphaMode(enum.Enum):
    HOLD = 0
    UP = 1
    DOWN = 2


# The policy's alpha_curve head indexes this order; sigmoid steepness per variant.
ALPHA_CURVES: tuple[str, ...] = ("linear", "cosine", "sigmoid_gentle", "sigmoid", "sigmoid_sharp")
_SIGMOID_STEEPNESS = {"sigmoid_gentle": 4.0, "sigmoid": 8.0, "sigmoid_sharp": 16.0}


def curve_value(curve: str, progress: float) -> float:
    """Fraction of the way from start to target after ``progress`` ∈ [0, 1] of the ramp."""
    p = min(max(progress, 0.0), 1.0)
    if curve == "linear":
        return p
    if curve == "cosine":
        return 0.5 - 0.5 * math.cos(math.pi * p)
    if curve in _SIGMOID_STEEPNESS:
        k = _SIGMOID_STEEPNESS[curve]
        lo, hi = 1 / (1 + math.exp(k / 2)), 1 / (1 + math.exp(-k / 2))
        return (1 / (1 + math.exp(-k * (p - 0.5))) - lo) / (hi - lo)
    raise ValueError(f"unknown alpha curve {curve!r}; known: {', '.join(ALPHA_CURVES)}")


@dataclass
class AlphaController:
    """HOLD / UP / DOWN toward ``target`` over ``ticks`` epochs; ``tick()`` once per epoch."""

    alpha: float = 0.0
    target: float = 0.0
    start: float = 0.0
    ticks: int = 0
    elapsed: int = 0
    curve: str = "linear"
    mode: AlphaMode = AlphaMode.HOLD

    def retarget(self, target: float, ticks: int, curve: str = "linear") -> None:
        """Head for ``target`` over ``ticks`` epochs (0: jump there now)."""
        if not 0.0 <= target <= 1.0 or ticks < 0:
            raise ValueError(f"alpha target must be in [0, 1] and ticks >= 0, got {target}, {ticks}")
        curve_value(curve, 0.0)  # validates the name
        self.start, self.target, self.ticks, self.elapsed, self.curve = self.alpha, target, ticks, 0, curve
        if ticks == 0 or math.isclose(target, self.alpha):
            self.alpha, self.mode = target, AlphaMode.HOLD
        else:
            self.mode = AlphaMode.UP if target > self.alpha else AlphaMode.DOWN

    def tick(self) -> float:
        """Advance one epoch; returns the new alpha."""
        if self.mode is AlphaMode.HOLD:
            return self.alpha
        self.elapsed += 1
        frac = curve_value(self.curve, self.elapsed / self.ticks)
        self.alpha = self.start + (self.target - self.start) * frac
        if self.elapsed >= self.ticks:
            self.alpha, self.mode = self.target, AlphaMode.HOLD
        return self.alpha

    @property
    def holding(self) -> bool:
        return self.mode is AlphaMode.HOLD

    @property
    def progress(self) -> float:
        """Fraction of the current ramp done (1.0 when holding)."""
        return 1.0 if self.holding or self.ticks == 0 else self.elapsed / self.ticks
