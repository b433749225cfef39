"""The records ``RunState`` keeps of one run (an env, a seed's timeline entry, a command followed, an anomaly) and
the bounds on how many."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from leyline import AnomalyDetected, CommandAction, CommandStatus
from leyline.esper import SlotSnapshot


@dataclass(frozen=True)
class Limits:
    """Bounds on what the console keeps per run, so an event storm cannot grow its memory."""

    log_lines: int = 2000
    """Event-log lines kept (the filter searches these)."""
    history: int = 120
    """Points kept per sparkline series."""
    timeline: int = 300
    """Seed lifecycle entries kept."""
    anomalies: int = 50
    """Anomalies kept for the strip."""
    commands: int = 30
    """Commands followed; the oldest finished ones are forgotten first."""
    envs: int = 64
    """Envs shown in the grid."""

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if value < 1:
                raise ValueError(f"Limits.{name} must be >= 1, got {value}")


@dataclass
class EnvView:
    """One env: its accuracy history and the seed in each of its slots."""

    accuracy: deque[float]
    val_loss: float | None = None
    reward: float | None = None
    action: str | None = None
    epoch: int = 0
    seeds: tuple[SlotSnapshot, ...] = ()
    host_params: int | None = None
    fossilized_params: int = 0


@dataclass(frozen=True)
class TimelineEntry:
    epoch: int
    env: int | None
    slot: str
    seed_id: str
    what: str


@dataclass
class CommandView:
    """One command as the console follows it, from its POST to a terminal status."""

    command_id: str
    action: CommandAction
    status: CommandStatus
    history: list[tuple[CommandStatus, int | None]] = field(default_factory=list)
    applied_step: int | None = None
    result: dict[str, object] | None = None
    message: str = ""

    def advance(self, status: CommandStatus, step: int | None, message: str = "") -> bool:
        """Record a status; a stale report (e.g. delivered after completed) does not go back."""
        if any(s is status for s, _ in self.history):
            return False
        self.history.append((status, step))
        if not self.status.terminal or status.terminal:
            self.status = status
        if message:
            self.message = message
        return True


@dataclass(frozen=True)
class AnomalyView:
    epoch: int
    env: int | None
    payload: AnomalyDetected
