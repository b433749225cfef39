"""The seam between the training loop and everything that watches or steers it.

The loop (``trainer.simic``) knows only ``RunHooks``: what a run's ``Run.hooks`` is (``nissa.parts.LoopHooks``,
defined there once). It reports where it is and emits payloads; commands are applied inside ``step_boundary``,
never mid-step. ``NullHooks`` is the null object for runs and tests without telemetry, so the loop has no
``if enabled:``.
"""

from __future__ import annotations

from typing import TypeAlias

from leyline import AnyPayload, Severity, TelemetryLevel
from nissa.parts import LoopHooks

RunHooks: TypeAlias = LoopHooks
"""What the training loop may call (``nissa.parts.LoopHooks``)."""


class NullHooks:
    """Hooks that record nothing: the loop runs the same code with or without telemetry."""

    def __init__(self, level: TelemetryLevel = TelemetryLevel.OFF) -> None:
        self._level = level
        self._epoch = 0

    @property
    def level(self) -> TelemetryLevel:
        return self._level

    @property
    def epoch(self) -> int:
        return self._epoch

    def emit(self, payload: AnyPayload, *, env: int | None = None, severity: Severity | None = None) -> None:
        return None

    def step_boundary(self, step: int, epoch: int) -> None:
        self._epoch = epoch

    def epoch_end(self, epoch: int) -> None:
        self._epoch = epoch

    def update_begin(self, round_: int) -> None:
        return None

    def update_end(self, round_: int) -> None:
        return None
