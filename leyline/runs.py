"""A run as the server lists it and shows it: ``RunSummary`` is the row of ``GET /runs`` (what every runs table
reads), ``RunDetail`` the body of ``GET /runs/{run_id}`` (the row and what only one run's page needs). The server
encodes them; the console and ``nissa.Api`` decode them; the OpenAPI document's schemas are theirs.
"""

from __future__ import annotations

import msgspec

from leyline.calls import CommandSpec
from leyline.enums import RunStatus
from leyline.payloads import RunFinished, Scalar
from leyline.payloads_ops import HubHealth
from leyline.summaries import MetricSummary


class RunSummary(msgspec.Struct, kw_only=True):
    """A run as ``GET /runs`` lists it."""

    run_id: str
    name: str
    status: RunStatus
    connected: bool = False
    """A trainer connection streams one of its ranks now (to any server of the database)."""
    created_at: float
    """When the server first heard of it (unix seconds)."""
    started_at: float | None = None
    """When its trainer started it (the query language's ``started``)."""
    ended_at: float | None = None
    last_seen_at: float
    duration_s: float | None = None
    """From start to end, or to the last time it was seen while it runs."""
    world_size: int = 1
    """Ranks of the run (torchrun)."""
    last_step: int = 0
    last_epoch: int = 0
    last_seq: dict[str, int] = {}
    """Highest seq stored per rank (rank as a string; "-1" is the server's own events)."""
    counts: dict[str, int] = {}
    """Stored events per kind."""
    stored_bytes: int = 0
    """Bytes the run takes in the store: its events as stored (JSON) and its artifacts."""
    status_detail: str | None = None
    """Why the status is what it is, naming ranks: "rank 1 silent for over 15 s" (degraded)."""
    host: str | None = None
    device: str | None = None
    config: dict[str, Scalar] = {}
    """Its config, flattened to ``dotted.key → value``: in a list, the first entries with long keys and values cut
    (``GET /runs/{run_id}`` has the whole)."""
    project: str = ""
    group: str = ""
    tags: list[str] = []
    notes: str = ""
    metrics: dict[str, MetricSummary] = {}
    """Its series summarised, by series key as the run shows it (``val_loss``; ``val_loss{rank=1}`` in a run of
    several ranks: ``leyline.run_keys``), as its events were stored (up to about a second behind them): in a list,
    those a table needs (see ``GET /runs``); in ``GET /runs/{run_id}``, every one."""

    @property
    def rank0_seq(self) -> int:
        """The last ``seq`` of rank 0 stored (0 when none): where a live stream of it may start."""
        return self.last_seq.get("0", 0)

    @property
    def events(self) -> int:
        """Events its trainer ranks sent that are stored."""
        return sum(v for k, v in self.last_seq.items() if not k.startswith("-"))


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


class RunDetail(RunSummary, kw_only=True):
    """A run as ``GET /runs/{run_id}`` shows it: its row (whole config, every series) and its ranks, its end, its
    hub's health, the commands it declared."""

    finish: RunFinished | None = None
    hub_health: HubHealth | None = None
    ranks: list[RankInfo] = []
    """Each rank's state, by rank."""
    commands: list[CommandSpec] = []
    """Commands of its own it declared when it started (``POST /escalate {"action": "call", ...}``)."""
    panels: list[str] = []
    """The client's own panels its page shows (``esper``: its env grid, seed log and PPO health, read at ``GET
    /runs/{run_id}/esper``), by the kinds of its stored events (``leyline.panels.client_panels``); none for a plain
    loop's run."""
    metrics_truncated: bool = False
    """The run has more series than ``metrics`` holds (10,000 at most, the first by key): ``GET
    /runs/{run_id}/series`` lists every one a page at a time, ``GET /runs?metrics=…`` summarises those named."""
