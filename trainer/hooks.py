"""The seam between the training loop and everything that watches or steers it.

The loop (``trainer.simic``) knows only ``RunHooks``: it reports where it is and emits
payloads; commands are applied inside ``step_boundary``, never mid-step. ``NullHooks`` is
the null object for runs and tests without telemetry, so the loop has no ``if enabled:``.
"""

from __future__ import annotations

from typing import Protocol

from leyline import AnyPayload, Severity, TelemetryLevel


class RunHooks(Protocol):
    """What the training loop may call; every method is cheap and never raises, but for one case: in a run
    of several ranks the ranks meet at the first step boundary and at every ``epoch_end``, and a rank
    that died makes that meeting raise (``RankError``): the run cannot go on without it."""

    @property
    def level(self) -> TelemetryLevel:
        """The effective telemetry level now (a debug window raises it temporarily)."""
        ...

    def emit(self, payload: AnyPayload, *, env: int | None = None, severity: Severity | None = None) -> None:
        """Send one event, stamped with the current step and epoch; never blocks."""
        ...

    def step_boundary(self, step: int, epoch: int) -> None:
        """Between two training batches: the only place commands are applied."""
        ...

    def epoch_end(self, epoch: int) -> None:
        """All envs finished ``epoch`` (global epoch count across rounds)."""
        ...

    def update_begin(self, round_: int) -> None:
        """The PPO update of ``round_`` starts."""
        ...

    def update_end(self, round_: int) -> None:
        """The PPO update of ``round_`` finished."""
        ...


class NullHooks:
    """Hooks that record nothing: the loop runs the same code with or without telemetry."""

    def __init__(self, level: TelemetryLevel = TelemetryLevel.OFF) -> None:
        self._level = level

    @property
    def level(self) -> TelemetryLevel:
        return self._level

    def emit(self, payload: AnyPayload, *, env: int | None = None, severity: Severity | None = None) -> None:
        return None

    def step_boundary(self, step: int, epoch: int) -> None:
        return None

    def epoch_end(self, epoch: int) -> None:
        return None

    def update_begin(self, round_: int) -> None:
        return None

    def update_end(self, round_: int) -> None:
        return None
