"""Payloads about the run's operation: telemetry, profiling, timing, commands, delivery."""

from __future__ import annotations

from typing import ClassVar

import msgspec

from leyline.commands import EscalateRequest
from leyline.enums import CommandAction, CommandStatus, EventKind, Kind, ProfileTarget, TelemetryLevel
from leyline.payloads import Payload, Scalar, Step


class TelemetryLevelChanged(Payload, kw_only=True, frozen=True):
    """The effective telemetry level changed; ``until_epoch`` is set for a temporary window."""

    KIND: ClassVar[Kind] = EventKind.TELEMETRY_LEVEL_CHANGED
    level: TelemetryLevel
    previous: TelemetryLevel
    reason: str = ""
    until_epoch: int | None = None
    command_id: str | None = None


class ProfileStarted(Payload, kw_only=True, frozen=True):
    """A torch.profiler window opened for ``batches`` training batches, or (``target`` ``update``,
    ``batches`` 0) over the next PPO update."""

    KIND: ClassVar[Kind] = EventKind.PROFILE_STARTED
    window: str
    batches: int
    trace_dir: str
    activities: list[str] = []
    command_id: str | None = None
    target: ProfileTarget = "batches"


class TopOp(msgspec.Struct, kw_only=True, frozen=True):
    """One operator of a profile summary; CUDA time is None where no CUDA activity was recorded."""

    name: str
    calls: int
    cpu_time_us: float
    self_cpu_time_us: float
    cuda_time_us: float | None = None


class ProfileCompleted(Payload, kw_only=True, frozen=True):
    """A profiler window closed: where its trace is and the operators that cost most."""

    KIND: ClassVar[Kind] = EventKind.PROFILE_COMPLETED
    window: str
    batches: int
    trace_path: str
    wall_s: float
    top_ops: list[TopOp]
    artifact: str | None = None
    command_id: str | None = None
    target: ProfileTarget = "batches"


class PhaseTime(msgspec.Struct, kw_only=True, frozen=True):
    """Wall and CPU time of one phase of an epoch."""

    phase: str
    wall_ms: float
    cpu_ms: float


class CompileStats(msgspec.Struct, kw_only=True, frozen=True):
    """``torch.compile`` since the run started: how much it compiled, and whether it held."""

    mode: str
    compiles: int
    """Frames Dynamo compiled: first compiles of each region and recompiles."""
    recompiles: int
    """Compiles of a region that already had compiled code (a guard failed: a new shape, mode, ...)."""
    graph_breaks: int
    """Places Dynamo could not trace and split a graph at."""
    eager_fallbacks: int
    """Frames left to run eagerly: their compile failed or hit the recompile limit (0 when compile holds)."""
    compile_s: float
    """Time spent compiling (Dynamo and the backend)."""
    last_reason: str | None = None
    """The latest recompile or fallback reason, first line."""


class PhaseTiming(Payload, kw_only=True, frozen=True):
    """Where one epoch's time went, phase by phase (and, when the run compiles, how compile fares)."""

    KIND: ClassVar[Kind] = EventKind.PHASE_TIMING
    round: int
    phases: list[PhaseTime]
    env_epochs_per_s: float | None = None
    compile: CompileStats | None = None


class CommandStatusChanged(Payload, kw_only=True, frozen=True):
    """A command moved along its lifecycle; ``applied_step`` and ``result`` once known."""

    KIND: ClassVar[Kind] = EventKind.COMMAND_STATUS
    command_id: str
    action: CommandAction
    status: CommandStatus
    applied_step: Step | None = None
    result: dict[str, Scalar] | None = None
    message: str = ""
    request: EscalateRequest | None = None
    """The request, on the first report of a command the run gave itself (auto-escalation, ``--profile``): the
    server never saw it otherwise, and keeps it as the command's."""


class EventsDropped(Payload, kw_only=True, frozen=True):
    """Metric events the hub dropped under overload since the last report, per kind."""

    KIND: ClassVar[Kind] = EventKind.EVENTS_DROPPED
    counts: dict[str, int]
    total: int


class HubHealth(Payload, kw_only=True, frozen=True):
    """The trainer's hub: queue depth, delivery counters, drops, reconnects, last error."""

    KIND: ClassVar[Kind] = EventKind.HUB_HEALTH
    queue_depth: int
    logged: int
    sent: int
    acked: int
    dropped: dict[str, int]
    reconnects: int
    connected: bool
    last_error: str | None = None


class Heartbeat(Payload, kw_only=True, frozen=True):
    """The run is alive."""

    KIND: ClassVar[Kind] = EventKind.HEARTBEAT
    uptime_s: float
