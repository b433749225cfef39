"""What each event kind is, said once: its payload type, whether the hub may drop it, whether the
server indexes it, its default severity and its mark on a run's charts. The hub's drop policy, the store's
index, the decoder and the server's kind filters all read this table; nothing else lists kinds.

It is the registry of the families of kinds (``FAMILIES``): the core's (``EventKind``, its rows ``CORE_KINDS``
below: what every run speaks) and each client's own, an enum of ``leyline.enums.Kind`` and its rows declared
beside its payloads (Esper's: ``EsperKind`` and ``leyline.esper.kinds.ESPER_KINDS``). A client's kinds are one
more family here and its payloads in ``AnyPayload``; the core neither lists nor names them (a test holds it):
it reads them from this table (``KINDS``, ``KIND_NAMES``).

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

from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from leyline.enums import Kind, Severity
from leyline.esper.kinds import ESPER_KINDS, EsperPayload
from leyline.kind_spec import KindSpec, table
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
_COMMAND_MARKED = frozenset({"applied", "completed", "failed"})


def _command_mark(p: Any) -> str | None:
    status = getattr(p.status, "value", p.status)
    if status not in _COMMAND_MARKED:
        return None
    action = getattr(p.action, "value", p.action)
    result = p.result if action == "call" and status == "completed" else None
    if result:  # a loop's own command: what it did (``set_lr`` → ``lr=0.01``) says which it was
        said = " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in result.items())
        return f"{action} {status} {said[:40]}"
    return f"{action} {status}"


CORE_KINDS: tuple[KindSpec, ...] = (
    KindSpec(RunStarted, critical=True, indexed=True),
    KindSpec(RunFinished, critical=True, indexed=True, marker=("end", lambda p: p.status)),
    KindSpec(RunResumed, critical=True, marker=("resumed", lambda p: f"from {p.checkpoint}")),
    KindSpec(Metrics, critical=False, internal=False),
    KindSpec(SystemMetrics, critical=False),
    KindSpec(TextLogged, critical=False),
    KindSpec(Histograms, critical=False),
    KindSpec(AnomalyDetected, critical=True, indexed=True, severity=_W, marker=("anomaly", lambda p: p.anomaly)),
    KindSpec(TelemetryLevelChanged, critical=True, indexed=True),
    KindSpec(DebugLayerStats, critical=False, severity=_D),
    KindSpec(GradientHealth, critical=False, severity=_D),
    KindSpec(ProfileStarted, critical=True, indexed=True),
    KindSpec(ProfileCompleted, critical=True, indexed=True),
    KindSpec(PhaseTiming, critical=False, severity=_D),
    KindSpec(CommandStatusChanged, critical=True, indexed=True, marker=("command", _command_mark)),
    KindSpec(EventsDropped, critical=True, indexed=True, severity=_W),
    KindSpec(HubHealth, critical=False, severity=_D),
    KindSpec(Heartbeat, critical=False, severity=_D),
    KindSpec(AlertChanged, critical=True, severity=_W, server_only=True),
    KindSpec(SummaryUpdated, critical=True, indexed=True, internal=False),
    KindSpec(ConfigUpdated, critical=True, indexed=True, internal=False),
)
"""What every run speaks."""

FAMILIES: tuple[tuple[KindSpec, ...], ...] = (CORE_KINDS, ESPER_KINDS)
"""Every family of kinds the contract speaks, each the rows of one enum of ``Kind``."""

KINDS: dict[Kind, KindSpec] = table(*FAMILIES)
"""Each kind's row: exactly one, its name its own (``table`` refuses any other)."""
KIND_NAMES: dict[str, Kind] = {kind.value: kind for kind in KINDS}
"""Each kind by its name on the wire (what a decoder, a filter or a store reads back as text)."""

if TYPE_CHECKING:
    KindName: TypeAlias = str
else:
    KindName = Literal[tuple(KIND_NAMES)]
"""A kind's name as a decoder reads it: one of ``KIND_NAMES`` (any other is refused, naming ``kind``); its
members are several enums, which one field of msgspec cannot be."""

INDEXED_KINDS: frozenset[Kind] = frozenset(k for k, spec in KINDS.items() if spec.indexed)
"""Kinds the store indexes (read by the store; see ``KindSpec.indexed``)."""
SERVER_ONLY_KINDS: frozenset[Kind] = frozenset(k for k, spec in KINDS.items() if spec.server_only)
"""Kinds no trainer may send (``KindSpec.server_only``)."""
