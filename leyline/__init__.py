"""leyline: the contract between esper-train, nissa-server and esper-watch."""

from leyline.codec import (
    DecodeError,
    decode_event,
    decode_events,
    decode_frame,
    encode,
    encode_event,
    to_builtins,
)
from leyline.commands import Command, CommandRecord, EscalateRequest, RankCommandStatus, StatusChange
from leyline.enums import (
    HEAD_NAMES,
    CommandAction,
    CommandStatus,
    EventKind,
    RunStatus,
    SeedStage,
    Severity,
    TelemetryLevel,
)
from leyline.events import (
    CRITICAL_KINDS,
    DEFAULT_SEVERITY,
    METRIC_KINDS,
    PAYLOAD_TYPES,
    SCHEMA_VERSION,
    SERVER_RANK,
    Event,
    make_event,
)
from leyline.payloads import (
    EpochCompleted,
    Payload,
    RunFinished,
    RunResumed,
    RunStarted,
    SeedFossilized,
    SeedGateEvaluated,
    SeedGerminated,
    SeedPruned,
    SeedStageChanged,
    SlotSnapshot,
)
from leyline.payloads_alerts import AlertChanged
from leyline.payloads_ops import (
    CommandStatusChanged,
    CompileStats,
    EventsDropped,
    Heartbeat,
    HubHealth,
    PhaseTime,
    PhaseTiming,
    ProfileCompleted,
    ProfileStarted,
    TelemetryLevelChanged,
    TopOp,
)
from leyline.payloads_policy import (
    AnomalyDetected,
    DebugLayerStats,
    GradientHealth,
    LayerStat,
    LSTMHealth,
    PPOUpdate,
)

__all__ = [name for name in dir() if not name.startswith("_")]
