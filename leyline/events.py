"""The event envelope, the kind → payload table, and the codec every package uses.

On the wire an event is one JSON object::

    {"run_id": "...", "rank": 0, "seq": 1, "ts": 1700000000.0, "step": 0, "epoch": 0,
     "env": null, "kind": "run_started", "severity": "info", "payload": {...}, "v": 1}

``seq`` counts 1, 2, 3 … per (run_id, rank); the server's own events use rank ``SERVER_RANK``.
"""

from __future__ import annotations

from typing import Annotated, cast

import msgspec

from leyline.enums import Kind, Severity
from leyline.ids import MAX_RUN_ID as MAX_RUN_ID
from leyline.ids import RUN_ID_PATTERN as RUN_ID_PATTERN
from leyline.ids import RUN_ID_RULE as RUN_ID_RULE
from leyline.ids import RunId as RunId
from leyline.kinds import KINDS, AnyPayload, KindName
from leyline.payloads import MAX_INT, Step

SCHEMA_VERSION = 1
SERVER_RANK = -1  # events the server itself authors (command queued/expired) use this rank

MIN_TS = 946_684_800.0
"""2000-01-01 UTC: the server refuses an event whose ``ts`` is earlier (4400, with the reason)."""
MAX_TS_AHEAD_S = 86_400.0
"""How far past the server's own clock an event's ``ts`` may be (a day), else it is refused likewise."""

PAYLOAD_TYPES: dict[Kind, type[AnyPayload]] = {kind: cast("type[AnyPayload]", spec.payload)
                                               for kind, spec in KINDS.items()}
"""Each kind's payload type (``AnyPayload`` names every one, a test holds it equal to the table)."""


# Read from the kind table (``leyline.kinds``), never listed again.
METRIC_KINDS: frozenset[Kind] = frozenset(k for k, spec in KINDS.items() if not spec.critical)
"""Kinds the hub may drop under overload (each drop counted); every other kind is critical."""
CRITICAL_KINDS: frozenset[Kind] = frozenset(KINDS) - METRIC_KINDS
DEFAULT_SEVERITY: dict[Kind, Severity] = {kind: spec.severity for kind, spec in KINDS.items()}

Seq = Annotated[int, msgspec.Meta(ge=1, le=MAX_INT)]
Rank = Annotated[int, msgspec.Meta(ge=SERVER_RANK, le=65535)]
NonNeg = Annotated[int, msgspec.Meta(ge=0, le=MAX_INT)]


class Event(msgspec.Struct, kw_only=True):
    """The envelope every event travels in; ``payload``'s type is fixed by ``kind``."""

    run_id: RunId
    rank: Rank = 0
    seq: Seq
    ts: float
    step: Step = 0
    epoch: NonNeg = 0
    env: NonNeg | None = None
    kind: Kind
    """A member of its family's enum (``EventKind``, or a client's own: ``leyline.kinds``)."""
    severity: Severity = Severity.INFO
    payload: AnyPayload
    v: int = SCHEMA_VERSION


class _WireEvent(msgspec.Struct, kw_only=True):
    """An envelope whose payload is still raw JSON, decoded in a second step by kind."""

    run_id: RunId
    rank: Rank = 0
    seq: Seq
    ts: float
    step: Step = 0
    epoch: NonNeg = 0
    env: NonNeg | None = None
    kind: KindName
    """The kind's name (``KIND_NAMES`` turns it into the kind)."""
    severity: Severity = Severity.INFO
    payload: msgspec.Raw
    v: int = SCHEMA_VERSION


def make_event(
    payload: AnyPayload,
    *,
    run_id: str,
    seq: int,
    ts: float,
    rank: int = 0,
    step: int = 0,
    epoch: int = 0,
    env: int | None = None,
    severity: Severity | None = None,
) -> Event:
    """Wrap a payload in its envelope; the kind and default severity follow the payload type."""
    kind = payload.KIND
    return Event(
        run_id=run_id, rank=rank, seq=seq, ts=ts, step=step, epoch=epoch, env=env, kind=kind,
        severity=severity or DEFAULT_SEVERITY[kind], payload=payload,
    )
