"""Enumerations shared by every package: the core's event kinds, severities, levels, commands, run statuses."""

from __future__ import annotations

import enum
from typing import Literal


class Kind(enum.StrEnum):
    """What an event reports (``Event.kind``): a member of one family of kinds, each family an enum of its own
    registered in the kinds table (``leyline.kinds``): the core's ``EventKind``, what every run speaks, and each
    client's own, declared beside its payloads. Each kind has exactly one payload type."""


class EventKind(Kind):
    """The core's kinds: what every run speaks, whichever loop it is (a client's own are its family's)."""

    RUN_STARTED = "run_started"
    RUN_FINISHED = "run_finished"
    GRADIENT_HEALTH = "gradient_health"
    ANOMALY_DETECTED = "anomaly_detected"
    TELEMETRY_LEVEL_CHANGED = "telemetry_level_changed"
    DEBUG_LAYER_STATS = "debug_layer_stats"
    PROFILE_STARTED = "profile_started"
    PROFILE_COMPLETED = "profile_completed"
    PHASE_TIMING = "phase_timing"
    COMMAND_STATUS = "command_status"
    EVENTS_DROPPED = "events_dropped"
    HUB_HEALTH = "hub_health"
    HEARTBEAT = "heartbeat"
    RUN_RESUMED = "run_resumed"
    ALERT = "alert"
    METRICS = "metrics"
    SUMMARY = "summary"
    CONFIG = "config"
    SYSTEM = "system"
    TEXT = "text"
    HISTOGRAM = "histogram"


class Severity(enum.StrEnum):
    """How much an event matters to an operator; ordered by ``rank``."""

    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return _SEVERITY_ORDER[self]


_SEVERITY_ORDER = {s: i for i, s in enumerate(Severity)}


class TelemetryLevel(enum.StrEnum):
    """How much the trainer measures; DEBUG is what an escalation opens."""

    OFF = "OFF"
    MINIMAL = "MINIMAL"
    NORMAL = "NORMAL"
    DEBUG = "DEBUG"

    @property
    def rank(self) -> int:
        return _LEVEL_ORDER[self]


_LEVEL_ORDER = {lv: i for i, lv in enumerate(TelemetryLevel)}


class CommandAction(enum.StrEnum):
    """What an escalation asks of a live run."""

    DEBUG = "debug"
    PROFILE = "profile"
    CHECKPOINT = "checkpoint"
    STOP = "stop"
    STACKS = "stacks"
    CALL = "call"
    """A command the run declared itself (``name`` and ``args``; see ``leyline.calls``)."""
    HPARAMS = "hparams"
    """New values of the run's hyperparameters, given to its ``on_hparams`` function (a sweep's explore)."""
    RESTORE = "restore"
    """Another run's shared checkpoint loaded through the run's ``on_restore`` function (a sweep's exploit)."""


class CommandStatus(enum.StrEnum):
    """Life of a command: queued → delivered → applied → completed | failed | expired | rejected."""

    QUEUED = "queued"
    DELIVERED = "delivered"
    APPLIED = "applied"
    COMPLETED = "completed"
    FAILED = "failed"
    EXPIRED = "expired"
    REJECTED = "rejected"

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL_STATUSES

    @property
    def by_server(self) -> bool:
        """Said by the server alone (a command queued, or expired undelivered): a trainer reporting it is
        refused at ingest."""
        return self in (CommandStatus.QUEUED, CommandStatus.EXPIRED)


_TERMINAL_STATUSES = frozenset(
    {CommandStatus.COMPLETED, CommandStatus.FAILED, CommandStatus.EXPIRED, CommandStatus.REJECTED}
)


class RunStatus(enum.StrEnum):
    """A run as the server sees it: live (heartbeats arrive), degraded (one of its ranks fell silent
    while the others run), lost (silent past a timeout), or ended as its ``run_finished`` says (every
    rank's, for a run of several): finished (completed), interrupted (Ctrl-C, SIGTERM), stopped (by a
    ``stop`` command, with a checkpoint to resume from) or failed (a rank failed, or stopped without
    finishing). A resumed run (``run_resumed``) is live again, whatever it ended as."""

    LIVE = "live"
    DEGRADED = "degraded"
    FINISHED = "finished"
    INTERRUPTED = "interrupted"
    STOPPED = "stopped"
    FAILED = "failed"
    LOST = "lost"

    @classmethod
    def after_finish(cls, finish_status: str) -> RunStatus:
        """The run's status once its ``run_finished`` with ``finish_status`` is stored (the one mapping)."""
        return _AFTER_FINISH.get(finish_status, cls.FAILED)

    @property
    def ended(self) -> bool:
        """The trainer said the run is over (a lost run may still come back)."""
        return self in _ENDED

    @property
    def running(self) -> bool:
        """Its trainer is streaming: commands are taken (degraded: some of its ranks only)."""
        return self in (RunStatus.LIVE, RunStatus.DEGRADED)


# ``RunFinished.status`` → ``RunStatus``; a status this table does not know counts as a failure.
_AFTER_FINISH = {
    "completed": RunStatus.FINISHED,
    "interrupted": RunStatus.INTERRUPTED,
    "stopped": RunStatus.STOPPED,
    "failed": RunStatus.FAILED,
}
_ENDED = frozenset(_AFTER_FINISH.values())


ProfileTarget = Literal["batches", "update"]
"""What a profile window records: the next ``batches`` training batches, or the next PPO update."""
