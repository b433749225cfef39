"""Server settings: one frozen, validated value shared by the CLI, the app factory and the tests."""

from __future__ import annotations

import ipaddress
import os
import pathlib
import re
from dataclasses import dataclass, field

import platformdirs

from leyline.frames import MAX_BATCH_EVENTS, MAX_EVENT_BYTES, MAX_FRAME_BYTES
from nissa_server.alerts.rules import AlertRules

DEFAULT_PORT = 8765
TOKEN_ENV = "NISSA_TOKEN"


def default_db_path() -> pathlib.Path:
    """The per-user data directory's database (created on first use)."""
    return pathlib.Path(platformdirs.user_data_dir("nissa", appauthor=False)) / "nissa.db"


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


TOKEN_CHARS = re.compile(r"[!-~]+")


def check_token(token: str) -> None:
    """A bearer token travels in an HTTP header, which carries bytes: only printable ASCII means the
    same bytes to every client (a UTF-8 client and a Latin-1 server would never agree)."""
    if not token.strip():
        raise ValueError("token must not be empty")
    if not TOKEN_CHARS.fullmatch(token):
        raise ValueError("token must be printable ASCII without spaces (letters, digits, punctuation)")


@dataclass(frozen=True, kw_only=True)
class ConnectionLimits:
    """What one client may hold of the server, and for how long: timeouts and caps that keep idle,
    slow or stalled connections from exhausting it (it keeps answering ``/healthz`` under them)."""

    header_timeout_s: float = 10.0
    """A connection must send a complete request head within this long of opening (or of its
    previous response): idle sockets and trickled headers are answered 408 and closed."""
    max_header_bytes: int = 64 * 1024
    """Largest request head (request line and headers); more is answered 431."""
    min_body_rate: int = 1024
    """Bytes/s a request body must keep arriving at, checked every ``header_timeout_s`` while it is
    incomplete (and the server is reading it): a body sent slower, or stalled, is answered 408 and its
    connection closed, so trickled bodies cannot hold connections as trickled heads cannot."""
    max_connections: int = 1000
    """Open connections at most. At the cap a new one first displaces the oldest connection that has
    not sent a request yet; if every connection is busy, the new one is answered 503."""
    max_watchers: int = 100
    """Open ``/ws/watch`` connections at most; one more is closed with 4429."""
    ingest_idle_s: float = 60.0
    """An ingest connection that sends no frame for this long is closed with 4410 (a live hub sends
    a heartbeat every few seconds)."""
    ws_ping_interval_s: float = 20.0
    """Websocket keep-alive pings this often (uvicorn's ``ws_ping_interval``)."""
    ws_ping_timeout_s: float = 20.0
    """A websocket whose peer does not answer a ping within this long is dropped."""
    write_buffer_bytes: int = 256 * 1024
    """Bytes a websocket may have waiting in its socket's send buffer before sends wait; bounds what
    a client that stops reading pins (plus the one frame being written)."""
    close_grace_s: float = 5.0
    """How long a connection being closed may take to flush and answer the close before it is cut."""

    def __post_init__(self) -> None:
        for name in ("header_timeout_s", "ingest_idle_s", "ws_ping_interval_s", "ws_ping_timeout_s",
                     "close_grace_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        for name in ("max_header_bytes", "min_body_rate", "max_connections", "max_watchers", "write_buffer_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Everything ``create_app`` and ``nissa-server`` need; invalid combinations fail on construction."""

    db_path: pathlib.Path = field(default_factory=default_db_path)
    """SQLite database file (WAL mode); its directory is created if missing."""
    db_url: str | None = None
    """PostgreSQL connection URL (``postgresql://user@host/dbname``); when set it is the store instead of
    ``db_path``, and several servers may share it."""
    host: str = "127.0.0.1"
    """Address to bind; anything but loopback requires ``token``."""
    port: int = DEFAULT_PORT
    """TCP port; 0 picks a free one (the CLI prints the one it got)."""
    token: str | None = None
    """Bearer token required by ingest, uploads and ``/escalate`` (and by reads with ``read_auth``)."""
    read_auth: bool = False
    """Require the token on read endpoints and ``/ws/watch`` as well."""
    open: bool = False
    """No token, on purpose: destructive calls (``DELETE /runs/{id}``) are open to every local process. Without
    a token and without this, they are refused (403)."""
    artifact_dir: pathlib.Path | None = None
    """Where uploaded artifacts live; defaults to ``<db name>.artifacts`` next to a SQLite file, to the
    user data directory with PostgreSQL (servers that share a database must share this directory too)."""
    lost_after_s: float = 60.0
    """A run with no connection and no event for this long is marked ``lost``."""
    sweep_lease_s: float = 30.0
    """A sweep's trial whose agent has not renewed its lease for this long is ``lost`` (and queued again)."""
    sweep_interval_s: float = 0.5
    """How often running sweeps' decisions are taken (metrics followed, pruning, PBT's exploits moved on)."""
    rank_silent_after_s: float = 15.0
    """A rank of a run of several with no heartbeat for this long is silent: its run is ``degraded`` while
    another rank runs, and ``failed`` once the others have ended and no connection holds it (three trainer
    heartbeats by default)."""
    command_ttl_s: float = 300.0
    """A command still ``queued`` (never delivered) after this long is marked ``expired``."""
    stacks_answer_s: float = 15.0
    """A ``stacks`` command some rank has not answered after this long is failed, naming that rank (a hub
    thread answers at once: the rank is stopped, or none of its Python threads can run)."""
    max_open_commands: int = 8
    """Commands per run not yet in a terminal status before ``/escalate`` answers 429."""
    max_frame_bytes: int = MAX_FRAME_BYTES
    """Largest websocket frame accepted from a client."""
    max_batch_events: int = MAX_BATCH_EVENTS
    """Most events in one ingest batch."""
    max_event_bytes: int = MAX_EVENT_BYTES
    """Largest single event, as stored."""
    max_body_bytes: int = 64 * 1024
    """Largest JSON request body (``/escalate``)."""
    max_artifact_bytes: int = 512 * 1024 * 1024
    """Largest artifact upload."""
    max_run_artifacts: int = 200
    """Artifacts one run may hold; an upload past it is answered 413."""
    max_run_artifact_bytes: int = 2 * 1024 * 1024 * 1024
    """Bytes of artifacts one run may hold; an upload past it is answered 413."""
    max_page_bytes: int = 8 * 1024 * 1024
    """Bytes of events in one page of ``GET /runs/{id}/events`` at most (a page always holds one event), and of
    one reply of ``GET /runs/{id}/series/{name}`` (which always holds one series)."""
    max_read_bytes: int = 64 * 1024 * 1024
    """Bytes of stored events one read decodes at most (``GET /runs/{id}/histograms/{name}``): a read that would
    decode more is refused (422) with the ``max_steps`` (or ``rank``) that fits."""
    read_slots: int = 2
    """Costly reads (``GET /runs``, a run, its series and distributions) served at once; the reads of one run
    take one of them at a time (``nissa_server.reads``)."""
    reads_per_client: int = 16
    """Costly reads one client (an address) may have in progress or waiting; one more is answered 429 with
    ``Retry-After`` (a browser opens 6 connections to a server: its page is never refused)."""
    watcher_max_pending: int = 100_000
    """Events a watcher may have queued before it is closed as lagging."""
    watcher_max_pending_bytes: int = 16 * 1024 * 1024
    """Bytes of events a watcher may have queued before it is closed as lagging."""
    limits: ConnectionLimits = field(default_factory=ConnectionLimits)
    """Timeouts and caps per connection."""
    writer_queue_batches: int = 256
    """Batches waiting for the store writer before ingest stops reading (backpressure)."""
    commit_interval_s: float = 0.02
    """The store commits at most this often; writes arriving meanwhile join the next transaction (fewer,
    larger transactions under load; a write after a quiet spell is committed at once)."""
    series_interval_s: float = 1.0
    """How often the points of newly stored events are written as series rows (reads add the points of the
    events not written yet, so charts are never behind; alert rules on series are up to this late)."""
    hello_timeout_s: float = 5.0
    """How long an ingest connection may take to send its ``hello`` (a trainer sends it at once); until it
    does, a server at its connection cap may displace it for a newcomer."""
    maintenance_interval_s: float = 1.0
    """How often lost runs and expired commands are looked for (and alert conditions checked)."""
    retry_max_s: float = 30.0
    """Longest wait between tries of a background task (maintenance, alerts, the series pass …) while it
    fails, the database being away: the wait doubles from half a second up to it."""
    alert_rules: AlertRules = field(default_factory=AlertRules)
    """Alert rules and where their notifications go (``--alerts FILE``); none here: ``nissa-server`` adds the
    built-in ones (``alerts.rules.with_builtin``) unless ``--no-default-alerts``."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "db_path", pathlib.Path(self.db_path))
        if self.artifact_dir is not None:
            object.__setattr__(self, "artifact_dir", pathlib.Path(self.artifact_dir))
        if self.db_url is not None and not self.db_url.startswith(("postgresql://", "postgres://")):
            raise ValueError(f"db_url must be a postgresql:// URL, got {self.db_url.split(':', 1)[0]!r}")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be 0..65535, got {self.port}")
        if self.token is not None:
            check_token(self.token)
        if not is_loopback(self.host) and not self.token:
            raise ValueError(
                f"refusing to listen on non-loopback address {self.host!r} without a token "
                f"(pass --token or set {TOKEN_ENV})"
            )
        if self.open and self.token:
            raise ValueError("--open means serving without a token: drop --open or the token")
        if self.read_auth and not self.token:
            raise ValueError("read_auth needs a token")
        for name in ("lost_after_s", "sweep_lease_s", "sweep_interval_s", "rank_silent_after_s", "command_ttl_s",
                     "stacks_answer_s", "hello_timeout_s", "maintenance_interval_s", "series_interval_s",
                     "retry_max_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if not 0 <= self.commit_interval_s <= 1:
            raise ValueError("commit_interval_s must be in 0..1")
        for name in ("max_open_commands", "max_frame_bytes", "max_batch_events", "max_event_bytes",
                     "max_body_bytes", "max_artifact_bytes", "max_run_artifacts", "max_run_artifact_bytes",
                     "max_page_bytes", "max_read_bytes", "read_slots", "reads_per_client",
                     "watcher_max_pending", "watcher_max_pending_bytes",
                     "writer_queue_batches"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")

    @property
    def database(self) -> str | pathlib.Path:
        """What the store opens: the PostgreSQL URL if there is one, else the SQLite file."""
        return self.db_url if self.db_url is not None else self.db_path

    @property
    def artifacts_root(self) -> pathlib.Path:
        """The artifact directory actually used."""
        if self.artifact_dir is not None:
            return self.artifact_dir
        if self.db_url is not None:
            return pathlib.Path(platformdirs.user_data_dir("nissa", appauthor=False)) / "artifacts"
        return self.db_path.with_name(self.db_path.name + ".artifacts")

    @property
    def hold_s(self) -> float:
        """How long a stream counts as held by a server after it last said so (every maintenance sweep):
        a server killed outright stops saying so, and its runs can then be found lost."""
        return max(5.0, 3 * self.maintenance_interval_s)

    @property
    def ws_max_size(self) -> int:
        """Protocol-level frame limit: above ours, so oversize frames get our close code and reason."""
        return self.max_frame_bytes * 2 + 1024


def token_from_env() -> str | None:
    """``NISSA_TOKEN`` if set and non-empty."""
    return os.environ.get(TOKEN_ENV) or None
