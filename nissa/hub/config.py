"""``HubConfig``: where a hub logs, where it sends, and how hard it tries."""

from __future__ import annotations

import pathlib
import re
import urllib.parse
from dataclasses import dataclass

import msgspec

from leyline.codec import check_rank, check_run_id
from leyline.events import RUN_ID_RULE
from leyline.payloads import MAX_NAME_CHARS

INGEST_PATH = "/ws/ingest"
_TOKEN = re.compile(r"[!-~]+")


def ingest_url(server: str) -> str:
    """``http://host:port`` (or ``ws://…``) → ``ws://host:port/ws/ingest``; ValueError names the problem."""
    parts = urllib.parse.urlsplit(server.strip())
    schemes = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}
    if parts.scheme not in schemes:
        raise ValueError(f"--server: expected http://host:port, got {server!r}")
    if not parts.hostname:
        raise ValueError(f"--server: no host in {server!r}")
    try:
        parts.port  # noqa: B018 - urllib validates the port lazily
    except ValueError:
        raise ValueError(f"--server: bad port in {server!r}") from None
    path = parts.path.rstrip("/")
    if not path.endswith(INGEST_PATH):
        path = f"{path}{INGEST_PATH}"
    return urllib.parse.urlunsplit((schemes[parts.scheme], parts.netloc, path, "", ""))


def server_list(server: str) -> list[str]:
    """``--server`` names one server or several, comma-separated (servers sharing one PostgreSQL
    database): the hub streams to the first and moves on to the next when a connection fails."""
    urls = [url.strip() for url in server.split(",") if url.strip()]
    if not urls:
        raise ValueError(f"--server: expected http://host:port, got {server!r}")
    return urls


def check_servers(server: str) -> list[str]:
    """The ingest URL of each server ``server`` names (one, or several comma-separated); a ValueError names
    the problem."""
    return [ingest_url(url) for url in server_list(server)]


def log_file_name(rank: int) -> str:
    """Rank 0 writes ``events.jsonl``; other ranks ``events.rank{N}.jsonl`` beside it."""
    return "events.jsonl" if rank == 0 else f"events.rank{rank}.jsonl"


def check_stream(*, server: str | None, token: str | None, name: str) -> None:
    """What a hub streams with: its servers, its token and the run's name (``HubConfig`` checks them, and
    ``nissa.Settings`` before there is a run id)."""
    if len(name) > MAX_NAME_CHARS:
        raise ValueError(f"run name must be at most {MAX_NAME_CHARS} characters, got {len(name)}")
    if token is not None and not _TOKEN.fullmatch(token):
        # It travels in an HTTP header: non-ASCII bytes would mean one thing here, another there.
        raise ValueError("token (--token / NISSA_TOKEN) must be printable ASCII without spaces")
    if server is not None:
        check_servers(server)


@dataclass(frozen=True)
class BackoffConfig:
    """Reconnect delays: exponential from ``initial_s`` to ``max_s``, each jittered."""

    initial_s: float = 0.2
    """First delay after a failed connection."""
    max_s: float = 5.0
    """Cap of the delay, however long the server stays away."""
    factor: float = 2.0
    """Growth of the delay per consecutive failure."""
    jitter: float = 0.5
    """Each delay is drawn uniformly from [delay * (1 - jitter), delay]."""

    def __post_init__(self) -> None:
        if not 0 < self.initial_s <= self.max_s:
            raise ValueError("backoff: need 0 < initial_s <= max_s")
        if self.factor < 1.0:
            raise ValueError("backoff: factor must be >= 1")
        if not 0.0 <= self.jitter < 1.0:
            raise ValueError("backoff: jitter must be in [0, 1)")


@dataclass(frozen=True)
class HubConfig:
    """One hub: a run and rank, its local log, and optionally a server to stream to."""

    run_id: str
    """The run this hub speaks for (a leyline ``RunId``)."""
    log_dir: pathlib.Path
    """Parent of the run directory; the log is ``log_dir/run_id/events.jsonl``."""
    server: str | None = None
    """``http://host:port`` of nissa-server, or several comma-separated (tried in turn when a connection
    fails); None keeps the run local (upload it later)."""
    token: str | None = None
    """Bearer token for the server's ingest endpoint."""
    rank: int = 0
    """This process's rank (torch.distributed); each rank has its own log and seq."""
    name: str = ""
    """Human name of the run, sent in the hello frame."""
    queue_size: int = 10_000
    """Metric events waiting for the worker beyond this many are dropped (and counted)."""
    batch_events: int = 2_000
    """Most events per websocket frame."""
    batch_bytes: int = 1_000_000
    """Most bytes of events per websocket frame."""
    send_linger_s: float = 0.02
    """Events logged meanwhile join a frame for up to this long before it is sent (unless a frame's
    worth is waiting): fewer, larger frames cost the server less per event, within the watchers'
    50 ms latency budget."""
    send_hold_s: float = 1.0
    """While a frame sent awaits its ack, new events wait for the ack (or a frame's worth of them) up to this
    long: a saturated server, slow to acknowledge, gets fewer, larger frames."""
    window_events: int = 50_000
    """Most events sent and not yet acknowledged."""
    linger_s: float = 0.002
    """The worker lets events gather this long before logging a batch: fewer, larger writes,
    and fewer moments where it competes with the training thread for the interpreter. A flush or
    close cuts it short. Longer gathers more (a DEBUG run's bursts of gradient events: about 40
    writes a run at 20 ms, 140 at 2 ms) but adds to the live latency on top of ``send_linger_s``."""
    heartbeat_s: float = 5.0
    """A ``heartbeat`` event this often."""
    health_s: float = 10.0
    """A ``hub_health`` event this often."""
    drop_report_s: float = 1.0
    """Drops are reported as ``events_dropped`` at most this often."""
    connect_timeout_s: float = 5.0
    """How long a connection (and its welcome) may take before it counts as failed."""
    ack_timeout_s: float = 15.0
    """A connection with unacknowledged events and no ack for this long is dropped and redone."""
    backoff: BackoffConfig = BackoffConfig()
    """Reconnect delays."""
    offline_grace_s: float = 3.0
    """At close, how long to keep trying a server that is away before leaving the rest in the log."""
    validate: bool = True
    """Check each encoded event against the contract before logging it: a malformed event is
    refused alone instead of making the server refuse every batch it sits in."""

    def __post_init__(self) -> None:
        try:
            check_run_id(self.run_id)
        except msgspec.ValidationError:
            raise ValueError(f"run_id {self.run_id!r} must be a str of {RUN_ID_RULE}") from None
        try:
            check_rank(self.rank)
        except msgspec.ValidationError:
            raise ValueError(f"rank must be an int in 0..65535, got {self.rank!r}") from None
        check_stream(server=self.server, token=self.token, name=self.name)
        for name in ("queue_size", "batch_events", "batch_bytes", "window_events"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        for name in ("linger_s", "send_linger_s", "send_hold_s"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1]")
        for name in ("heartbeat_s", "health_s", "drop_report_s", "connect_timeout_s", "ack_timeout_s",
                     "offline_grace_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0")

    @property
    def run_dir(self) -> pathlib.Path:
        return pathlib.Path(self.log_dir) / self.run_id

    @property
    def log_path(self) -> pathlib.Path:
        return self.run_dir / log_file_name(self.rank)

    @property
    def ws_url(self) -> str | None:
        """The first server's ingest URL."""
        return self.ws_urls[0] if self.server is not None else None

    @property
    def ws_urls(self) -> list[str]:
        """Every server's ingest URL, in the order they are tried."""
        return check_servers(self.server) if self.server is not None else []
