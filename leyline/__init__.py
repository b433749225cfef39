"""leyline: the contract between esper-train, nissa-server and esper-watch.

The names here are what every run speaks, whichever loop it is. Esper's own (its kinds, payloads and panels) are
imported from ``leyline.esper``; none is exported here (``tests/test_boundaries.py`` holds it)."""

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
    "CRITICAL_KINDS", "DEFAULT_SEVERITY", "ESCALATIONS", "INDEXED_KINDS", "KINDS", "KIND_NAMES", "MAX_METRICS",
    "METRIC_KINDS", "PAYLOAD_TYPES", "SCHEMA_VERSION", "SERVER_RANK", "decode_event", "decode_events",
    "decode_frame", "direction_of", "encode", "encode_event", "make_event", "metric_value", "to_builtins",
    "AlertChanged", "AnomalyDetected", "AnyPayload", "CallRequest", "CheckpointRequest", "Command", "CommandAction",
    "CommandRecord", "CommandStatus", "CommandStatusChanged", "CompileStats", "ConfigUpdated", "CpuStats",
    "DebugLayerStats", "DebugRequest", "DecodeError", "DiskStats", "Distribution", "EscalateRequest", "Event",
    "EventKind", "EventsDropped", "GpuStats", "GradientHealth", "Heartbeat", "Histograms", "HparamsRequest",
    "HubHealth", "Kind", "KindSpec", "LayerStat", "MemoryStats", "MetricSummary", "Metrics", "NetworkStats",
    "Payload", "PhaseTime", "PhaseTiming", "ProfileCompleted", "ProfileRequest", "ProfileStarted",
    "RankCommandStatus", "RankInfo", "RestoreRequest", "RunDetail", "RunFinished", "RunResumed", "RunStarted",
    "RunStatus", "RunSummary", "Severity", "StacksRequest", "StatusChange", "StopRequest", "SummaryUpdated",
    "SystemMetrics", "TelemetryLevel", "TelemetryLevelChanged", "TextLogged", "TopOp",
]
