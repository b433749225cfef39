"""What a server keeps of each run in memory: who it is, its ingest connections here, and the sequence
state of the streams it is receiving.

The database holds everything shared (status, liveness, commands); several servers may serve one run,
so a server loads a stream's state when a trainer's session opens, not once at start-up.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from leyline import Command


class Connection(Protocol):
    """An ingest connection, as far as the registry cares."""

    rank: int
    session: str

    def supersede(self) -> None: ...

    def send_command(self, command: Command) -> None:
        """Send ``command`` down this connection (to its trainer rank)."""


@dataclass
class Stream:
    """Sequence state of one (run, rank): what is accepted, and what is durably stored."""

    contiguous: int = 0
    """Highest seq such that 1..seq are all accepted (stored or on their way to the store)."""
    last_seq: int = 0
    """Highest seq accepted at all."""
    stored: int = 0
    """Highest contiguous seq committed to the database: what an ack reports."""
    ahead: set[int] = field(default_factory=set)
    """Accepted seqs above ``contiguous`` (only after a gap)."""
    broken: bool = False
    """A write built on this state failed: it claims seqs the database lacks, so no later write built on
    it may commit; the session ends and the next one loads the stream again."""

    def accept(self, seq: int) -> bool:
        """Take ``seq`` if it is new; False for a duplicate."""
        if seq <= self.contiguous or seq in self.ahead:
            return False
        if seq == self.contiguous + 1:
            self.contiguous = seq
            if self.ahead:
                while self.contiguous + 1 in self.ahead:
                    self.contiguous += 1
                    self.ahead.discard(self.contiguous)
        else:
            self.ahead.add(seq)
        if seq > self.last_seq:
            self.last_seq = seq
        return True


@dataclass
class RunState:
    """One run as this server knows it."""

    run_key: int
    run_id: str
    name: str = ""
    secret_hash: bytes | None = None
    """SHA-256 of the run's stream secret; None for a run stored before streams had secrets."""
    streams: dict[int, Stream] = field(default_factory=dict)
    """Sequence state of the ranks a session here is receiving (loaded when the session opens)."""
    connections: dict[int, Connection] = field(default_factory=dict)
    """The live trainer connection of each rank, on this server."""

    def stream(self, rank: int) -> Stream:
        found = self.streams.get(rank)
        if found is None:
            found = self.streams[rank] = Stream()
        return found

    @property
    def connected(self) -> bool:
        return bool(self.connections)

    def attach(self, conn: Connection) -> None:
        """Make ``conn`` this rank's ingest connection, superseding an older one."""
        old = self.connections.get(conn.rank)
        self.connections[conn.rank] = conn
        if old is not None and old is not conn:
            old.supersede()

    def detach(self, conn: Connection) -> None:
        if self.connections.get(conn.rank) is conn:
            del self.connections[conn.rank]

    def superseded_elsewhere(self, rank: int, session: str) -> None:
        """Another server's session took over ``rank``: ours (if it is not that one) goes."""
        conn = self.connections.get(rank)
        if conn is not None and conn.session != session:
            del self.connections[rank]
            conn.supersede()


class RunRegistry:
    """The runs this server has met, by id: a cache of the database's ``runs`` (keys are given there)."""

    def __init__(self) -> None:
        self._runs: dict[str, RunState] = {}

    def get(self, run_id: str) -> RunState | None:
        return self._runs.get(run_id)

    def remember(self, run_key: int, run_id: str, name: str, secret_hash: bytes | None) -> RunState:
        """The cached run for this row, created or brought up to date (the same object while it lives)."""
        run = self._runs.get(run_id)
        if run is None or run.run_key != run_key:  # new here, or deleted and created again elsewhere
            run = self._runs[run_id] = RunState(run_key=run_key, run_id=run_id, name=name, secret_hash=secret_hash)
        run.name, run.secret_hash = name, secret_hash
        return run

    def by_key(self, run_key: int) -> RunState | None:
        """The cached run of this database key (a scan: only rare notes from the database ask by key)."""
        return next((run for run in self._runs.values() if run.run_key == run_key), None)

    def forget(self, run_key: int) -> RunState | None:
        run = self.by_key(run_key)
        if run is not None:
            del self._runs[run.run_id]
        return run

    def __iter__(self) -> Iterator[RunState]:
        return iter(list(self._runs.values()))

    def __len__(self) -> int:
        return len(self._runs)
