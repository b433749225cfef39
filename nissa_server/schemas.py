"""Response bodies of the REST API (request bodies and events are leyline's own types)."""

from __future__ import annotations

from typing import Literal

import msgspec

from leyline import CommandStatus, HubHealth, RunFinished, RunStatus
from leyline.calls import CommandSpec
from leyline.payloads import Scalar
from leyline.summaries import MetricSummary


class RankInfo(msgspec.Struct, kw_only=True):
    """One rank of a run: where it is, when it was last heard from, how its hub fares."""

    rank: int
    status: str
    """live, silent (no heartbeat for a while, others running), lost (stopped without finishing), or ended
    as its ``run_finished`` says: finished, interrupted, failed."""
    connected: bool = False
    """A trainer connection streams this rank now (to any server of the database)."""
    last_step: int = 0
    """Training step of its last heartbeat."""
    last_epoch: int = 0
    seen_at: float | None = None
    """Server time of its last heartbeat (or hub health, start, end)."""
    started_at: float | None = None
    ended_at: float | None = None
    last_seq: int = 0
    """Highest seq of its stream stored."""
    queue_depth: int | None = None
    """Events waiting in its hub, at its last hub health."""
    dropped: int = 0
    """Metric events its hub dropped, at its last hub health."""
    host: str = ""
    pid: int = 0
    device: str = ""


class RunInfo(msgspec.Struct, kw_only=True):
    """A run as ``GET /runs`` and ``GET /runs/{run_id}`` show it."""

    run_id: str
    name: str
    status: RunStatus
    connected: bool
    created_at: float
    started_at: float | None = None
    ended_at: float | None = None
    last_seen_at: float
    last_step: int = 0
    last_epoch: int = 0
    last_seq: dict[str, int] = {}
    """Highest seq stored per rank (rank as a string; "-1" is the server's own events)."""
    counts: dict[str, int] = {}
    """Stored events per kind."""
    config: dict[str, Scalar] | None = None
    host: str | None = None
    device: str | None = None
    finish: RunFinished | None = None
    hub_health: HubHealth | None = None
    stored_bytes: int = 0
    """Bytes the run takes in the store: its events as stored (JSON) and its artifacts (the database's
    indexes and page slack not counted)."""
    world_size: int = 1
    """Ranks of the run (torchrun)."""
    status_detail: str | None = None
    """Why the status is what it is, naming ranks: "rank 1 silent for over 15 s" (degraded), "rank 1 stopped
    without finishing" (failed)."""
    ranks: list[RankInfo] = []
    """Each rank's state, by rank."""
    commands: list[CommandSpec] = []
    """Commands of the run's own it declared when it started (``POST /escalate {"action": "call", ...}``)."""
    project: str = ""
    group: str = ""
    tags: list[str] = []
    notes: str = ""
    metrics: dict[str, MetricSummary] = {}
    """The run's series summarised, by series key (``val_loss{rank=0}``), as its events were stored (up to about
    a second behind them): every one, or the first 10,000 by key where ``metrics_truncated`` says so."""
    metrics_truncated: bool = False
    """The run has more series than ``metrics`` holds (10,000 at most): ``GET /runs/{run_id}/series`` lists every
    one a page at a time, ``GET /runs?metrics=…`` summarises those named."""


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
