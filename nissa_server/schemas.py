"""Response bodies of the REST API (request bodies, events and runs are leyline's own types)."""

from __future__ import annotations

from typing import Literal

import msgspec

from leyline import CommandStatus


class DeletedRun(msgspec.Struct, kw_only=True):
    """Answer to ``DELETE /runs/{run_id}``: what went."""

    run_id: str
    events: int
    """Events deleted."""
    commands: int
    """Commands deleted."""
    artifacts: int
    """Artifact files deleted."""
    stored_bytes: int
    """Bytes the run took (as ``stored_bytes`` of ``GET /runs`` said)."""


class EscalateAccepted(msgspec.Struct, kw_only=True):
    """Answer to ``POST /escalate``."""

    command_id: str
    status: CommandStatus


class ArtifactInfo(msgspec.Struct, kw_only=True):
    """One stored artifact of a run."""

    name: str
    size: int
    sha256: str
    created_at: float
    url: str


class Degraded(msgspec.Struct, kw_only=True):
    """A part of the server that does not work now (tried again until it does)."""

    since: float
    """When it first failed (unix seconds)."""
    reason: str
    """Its first failure: the error's type and first line."""
    failures: int
    """Failures in a row so far."""


class Health(msgspec.Struct, kw_only=True):
    """Answer to ``GET /healthz``."""

    status: Literal["ok", "degraded"]
    """``degraded`` while some part does not work (the database away: reads answer 503, background tasks wait
    and try again); the server itself is up either way."""
    version: str
    schema_version: int
    runs: int | None = None
    """Runs stored (null to a request without the token on a server started with ``--read-auth``, or while
    the database is away)."""
    watchers: int | None = None
    """Watchers connected (null to a request without the token on a server started with ``--read-auth``)."""
    degraded: dict[str, Degraded] = msgspec.field(default_factory=dict)
    """The parts that do not work now, by name: ``database``, or a background task (``maintenance``,
    ``alert-sweep``, ``alert-delivery``, ``series-pass``, ``publisher``, ``notifications``, ``writer``); empty to
    a request without the token on a server started with ``--read-auth``."""


class ErrorBody(msgspec.Struct, kw_only=True):
    """Every 4xx answer: why the request was refused."""

    detail: str


class AlertDelivery(msgspec.Struct, kw_only=True):
    """One notification of an alert to one destination URL (``name/index`` of the rules file)."""

    destination: str
    state: str
    """What it says: firing or resolved."""
    status: str
    """pending (retries left), sent, or failed (gave up)."""
    attempts: int = 0
    last_error: str = ""
    sent_at: float | None = None


class AlertInfo(msgspec.Struct, kw_only=True):
    """An alert as ``GET /alerts`` shows it: a rule's condition on a run, from firing to resolved."""

    alert_id: str
    run_id: str
    run_name: str
    rule: str
    condition: str
    """status, anomaly, hang or straggler."""
    subject: str
    """What it is about within the run: a status, an anomaly's name, a rank."""
    rank: int | None = None
    step: int | None = None
    """Hangs: the step the rank is stuck at."""
    status: str
    """firing or resolved."""
    message: str
    fired_at: float
    seen_at: float
    """Last time the condition was seen (anomalies: the last matching one)."""
    resolved_at: float | None = None
    command_id: str | None = None
    """The ``stacks`` command asked for it (hangs): every rank's stacks at ``GET /commands/{command_id}``."""
    deliveries: list[AlertDelivery] = []
