"""Server settings: one frozen, validated value shared by the CLI, the app factory and the tests."""

from __future__ import annotations

import ipaddress
import os
import pathlib
from dataclasses import dataclass, field

import platformdirs

from leyline.frames import MAX_BATCH_EVENTS, MAX_EVENT_BYTES, MAX_FRAME_BYTES

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


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Everything ``create_app`` and ``nissa-server`` need; invalid combinations fail on construction."""

    db_path: pathlib.Path = field(default_factory=default_db_path)
    """SQLite database file (WAL mode); its directory is created if missing."""
    host: str = "127.0.0.1"
    """Address to bind; anything but loopback requires ``token``."""
    port: int = DEFAULT_PORT
    """TCP port; 0 picks a free one (the CLI prints the one it got)."""
    token: str | None = None
    """Bearer token required by ingest, uploads and ``/escalate`` (and by reads with ``read_auth``)."""
    read_auth: bool = False
    """Require the token on read endpoints and ``/ws/watch`` as well."""
    artifact_dir: pathlib.Path | None = None
    """Where uploaded artifacts live; defaults to ``<db name>.artifacts`` next to the database."""
    lost_after_s: float = 60.0
    """A run with no connection and no event for this long is marked ``lost``."""
    command_ttl_s: float = 300.0
    """A command still ``queued`` (never delivered) after this long is marked ``expired``."""
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
    watcher_max_pending: int = 100_000
    """Events a watcher may have queued before it is closed as lagging."""
    writer_queue_batches: int = 256
    """Batches waiting for the store writer before ingest stops reading (backpressure)."""
    hello_timeout_s: float = 15.0
    """How long an ingest connection may take to send its ``hello``."""
    maintenance_interval_s: float = 1.0
    """How often lost runs and expired commands are looked for."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "db_path", pathlib.Path(self.db_path))
        if self.artifact_dir is not None:
            object.__setattr__(self, "artifact_dir", pathlib.Path(self.artifact_dir))
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be 0..65535, got {self.port}")
        if self.token is not None and not self.token.strip():
            raise ValueError("token must not be empty")
        if not is_loopback(self.host) and not self.token:
            raise ValueError(
                f"refusing to listen on non-loopback address {self.host!r} without a token "
                f"(pass --token or set {TOKEN_ENV})"
            )
        if self.read_auth and not self.token:
            raise ValueError("read_auth needs a token")
        for name in ("lost_after_s", "command_ttl_s", "hello_timeout_s", "maintenance_interval_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        for name in ("max_open_commands", "max_frame_bytes", "max_batch_events", "max_event_bytes",
                     "max_body_bytes", "max_artifact_bytes", "watcher_max_pending", "writer_queue_batches"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")

    @property
    def artifacts_root(self) -> pathlib.Path:
        """The artifact directory actually used."""
        return self.artifact_dir or self.db_path.with_name(self.db_path.name + ".artifacts")

    @property
    def ws_max_size(self) -> int:
        """Protocol-level frame limit: above ours, so oversize frames get our close code and reason."""
        return self.max_frame_bytes * 2 + 1024


def token_from_env() -> str | None:
    """``NISSA_TOKEN`` if set and non-empty."""
    return os.environ.get(TOKEN_ENV) or None
