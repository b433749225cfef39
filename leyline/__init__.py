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
from leyline.commands import (
    ESCALATIONS,
    CallRequest,
    CheckpointRequest,
    Command,
    CommandRecord,
    DebugRequest,
    EscalateRequest,
    HparamsRequest,
    ProfileRequest,
    RankCommandStatus,
    RestoreRequest,
    StacksRequest,
    StatusChange,
    StopRequest,
)
from leyline.enums import (
    CommandAction,
    CommandStatus,
    EventKind,
    Kind,
    RunStatus,
    Severity,
    TelemetryLevel,
)
from leyline.esper import (
    HEAD_NAMES,
    EpochCompleted,
    LSTMHealth,
    PPOUpdate,
    SeedFossilized,
    SeedGateEvaluated,
    SeedGerminated,
    SeedPruned,
    SeedStage,
    SeedStageChanged,
    SlotSnapshot,
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
from leyline.kinds import INDEXED_KINDS, KIND_NAMES, KINDS, AnyPayload, KindSpec
from leyline.metrics import MAX_METRICS, Metrics, SummaryUpdated, TextLogged, metric_value
from leyline.payloads import (
    ConfigUpdated,
    Payload,
    RunFinished,
    RunResumed,
    RunStarted,
)
from leyline.payloads_alerts import AlertChanged
from leyline.payloads_health import (
    AnomalyDetected,
    DebugLayerStats,
    GradientHealth,
    LayerStat,
)
from leyline.payloads_histogram import Distribution, Histograms
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
from leyline.payloads_system import (
    CpuStats,
    DiskStats,
    GpuStats,
    MemoryStats,
    NetworkStats,
    SystemMetrics,
)
from leyline.runs import RankInfo, RunDetail, RunSummary
from leyline.summaries import MetricSummary, direction_of

__all__ = [
    "ESCALATIONS", "CallRequest", "CheckpointRequest", "HparamsRequest", "RestoreRequest", "DebugRequest",
    "ProfileRequest", "StacksRequest", "StopRequest",
    "AlertChanged", "AnomalyDetected", "AnyPayload", "CRITICAL_KINDS", "Command", "CommandAction", "CommandRecord",
    "CommandStatus",
    "CommandStatusChanged", "CompileStats", "CpuStats", "DEFAULT_SEVERITY", "DebugLayerStats", "DecodeError",
    "DiskStats", "Distribution", "EpochCompleted", "EscalateRequest", "Event", "EventKind", "EventsDropped",
    "GpuStats", "GradientHealth", "HEAD_NAMES", "Heartbeat", "Histograms", "HubHealth", "INDEXED_KINDS",
    "KIND_NAMES", "KINDS", "Kind",
    "KindSpec", "LSTMHealth", "LayerStat", "MAX_METRICS", "METRIC_KINDS", "MemoryStats", "MetricSummary", "Metrics",
    "NetworkStats", "PAYLOAD_TYPES", "PPOUpdate", "Payload", "PhaseTime", "PhaseTiming", "ProfileCompleted",
    "ProfileStarted", "RankCommandStatus", "RankInfo", "RunDetail", "RunFinished", "RunResumed", "RunStarted",
    "RunStatus", "RunSummary", "SCHEMA_VERSION",
    "SERVER_RANK", "SeedFossilized", "SeedGateEvaluated", "SeedGerminated", "SeedPruned", "SeedStage",
    "ConfigUpdated", "SeedStageChanged", "Severity", "SlotSnapshot", "StatusChange", "SummaryUpdated", "SystemMetrics",
    "TelemetryLevel", "TelemetryLevelChanged", "TextLogged", "TopOp", "decode_event", "decode_events", "decode_frame",
    "direction_of", "encode", "encode_event", "make_event", "metric_value", "to_builtins",
]
