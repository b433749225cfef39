"""What each event kind is, said once: its payload type, whether the hub may drop it, whether the
server indexes it, and its default severity. The hub's drop policy and the store's index both read
this table; nothing else lists kinds. Its rows are the core's (``CORE_KINDS``, below: what every run speaks)
and Esper's, declared beside Esper's payloads (``leyline.esper.kinds``) and read from there.

- ``critical``: never dropped. The hub blocks nothing for it, but it never sheds it under overload
  either; every other kind is a *metric*, droppable when the hub's queue is full, each drop counted
  and reported in an ``events_dropped`` event.
- ``server_only``: only the server writes it (at rank ``SERVER_RANK``); an ingest connection that sends one is
  closed with 4400 and a reason, so that no trainer can forge what the server says (a red alert banner).
- ``internal``: its series describe the run's machinery (its start and end, the hub, the machine, commands,
  nissa's own watch of the model) rather than measure what the loop measures: kept apart from a run's
  metrics (not a runs table's default columns, not in ``nissa.Api.runs_frame`` unless asked; see
  ``leyline.series.internal``). A loop's own values (``metrics``, ``summary``: named as the loop named
  them) never are.
- ``indexed``: the store keeps a second row of every event of the kind, so that a query by kind reads
  those rows instead of the run's whole stream. Only rare kinds are worth it. Changing a kind's
  ``indexed`` changes what the store holds: it takes a store migration that indexes the events
  already stored. An indexed kind is critical (a dropped event would leave a gap in the index).

An event whose kind this table does not know is refused: ``decode_event`` raises, and the server closes
an ingest connection that sends one with code 4415 (``CLOSE_UNSUPPORTED``, as for a newer schema version)
and a reason naming ``kind``: a trainer must not stream kinds its server does not know. A loop reports anything
of its own through ``metrics`` (named scalars) rather than a kind of its own.
"""

from __future__ import annotations

from typing import TypeAlias

from leyline.enums import EventKind, Severity
from leyline.esper.kinds import ESPER_KINDS, EsperPayload
from leyline.kind_spec import KindSpec
from leyline.metrics import Metrics, SummaryUpdated, TextLogged
from leyline.payloads import ConfigUpdated, RunFinished, RunResumed, RunStarted
from leyline.payloads_alerts import AlertChanged
from leyline.payloads_health import AnomalyDetected, DebugLayerStats, GradientHealth
from leyline.payloads_histogram import Histograms
from leyline.payloads_ops import (
    CommandStatusChanged,
    EventsDropped,
    Heartbeat,
    HubHealth,
    PhaseTiming,
    ProfileCompleted,
    ProfileStarted,
    TelemetryLevelChanged,
)
from leyline.payloads_system import SystemMetrics

AnyPayload: TypeAlias = (
    RunStarted | RunFinished | RunResumed | Metrics | SystemMetrics | TextLogged | Histograms | AnomalyDetected
    | TelemetryLevelChanged | DebugLayerStats | GradientHealth | ProfileStarted | ProfileCompleted | PhaseTiming
    | CommandStatusChanged | EventsDropped | HubHealth | Heartbeat | AlertChanged | SummaryUpdated | ConfigUpdated
    | EsperPayload
)
"""Every payload type, written out so that the checker sees each (a test holds it equal to the table below)."""


_D, _W = Severity.DEBUG, Severity.WARNING

CORE_KINDS: tuple[KindSpec, ...] = (
    KindSpec(RunStarted, critical=True, indexed=True),
    KindSpec(RunFinished, critical=True, indexed=True),
    KindSpec(RunResumed, critical=True),
    KindSpec(Metrics, critical=False, internal=False),
    KindSpec(SystemMetrics, critical=False),
    KindSpec(TextLogged, critical=False),
    KindSpec(Histograms, critical=False),
    KindSpec(AnomalyDetected, critical=True, indexed=True, severity=_W),
    KindSpec(TelemetryLevelChanged, critical=True, indexed=True),
    KindSpec(DebugLayerStats, critical=False, severity=_D),
    KindSpec(GradientHealth, critical=False, severity=_D),
    KindSpec(ProfileStarted, critical=True, indexed=True),
    KindSpec(ProfileCompleted, critical=True, indexed=True),
    KindSpec(PhaseTiming, critical=False, severity=_D),
    KindSpec(CommandStatusChanged, critical=True, indexed=True),
    KindSpec(EventsDropped, critical=True, indexed=True, severity=_W),
    KindSpec(HubHealth, critical=False, severity=_D),
    KindSpec(Heartbeat, critical=False, severity=_D),
    KindSpec(AlertChanged, critical=True, severity=_W, server_only=True),
    KindSpec(SummaryUpdated, critical=True, indexed=True, internal=False),
    KindSpec(ConfigUpdated, critical=True, indexed=True, internal=False),
)
"""What every run speaks."""



KINDS: dict[EventKind, KindSpec] = {spec.payload.KIND: spec for spec in CORE_KINDS + ESPER_KINDS}
assert set(KINDS) == set(EventKind), "every kind needs exactly one row"

INDEXED_KINDS: frozenset[EventKind] = frozenset(k for k, spec in KINDS.items() if spec.indexed)
"""Kinds the store indexes (read by the store; see ``KindSpec.indexed``)."""
SERVER_ONLY_KINDS: frozenset[EventKind] = frozenset(k for k, spec in KINDS.items() if spec.server_only)
"""Kinds no trainer may send (``KindSpec.server_only``)."""
