"""What the server knows about each run in memory: per-rank sequence state, liveness, connections.

The database mirrors this; the in-memory view decides de-duplication and acks without a read.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from leyline import RunStatus


class Connection(Protocol):
    """An ingest connection, as far as the registry cares."""

    rank: int

    def supersede(self) -> None: ...


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

    def next_seq(self) -> int:
        """Allocate the next seq of a stream the server itself authors."""
        seq = self.last_seq + 1
        self.accept(seq)
        return seq


@dataclass
class RunState:
    """One run as the server sees it now."""

    run_key: int
    run_id: str
    name: str = ""
    status: RunStatus = RunStatus.LIVE
    last_seen: float = field(default_factory=time.time)
    last_step: int = 0
    last_epoch: int = 0
    streams: dict[int, Stream] = field(default_factory=dict)
    connections: dict[int, Connection] = field(default_factory=dict)
    dirty: set[int] = field(default_factory=set)
    """Ranks whose last write failed; their stream is reloaded from the store before next use."""
    secret_hash: bytes | None = None
    """SHA-256 of the run's stream secret; None for a run stored before streams had secrets."""

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

    def touch(self, now: float | None = None) -> None:
        self.last_seen = time.time() if now is None else now

    def revive(self) -> None:
        """A live trainer is back on a run given up as lost (an upload of its log is not one)."""
        if self.status is RunStatus.LOST:
            self.status = RunStatus.LIVE

    def is_lost(self, now: float, lost_after_s: float) -> bool:
        return self.status is RunStatus.LIVE and not self.connected and now - self.last_seen > lost_after_s


class RunRegistry:
    """Every run by id; run keys are allocated here so creating a run never waits for the store."""

    def __init__(self, runs: Iterable[RunState] = (), next_key: int = 1) -> None:
        self._runs: dict[str, RunState] = {r.run_id: r for r in runs}
        self._next_key = max([next_key, *(r.run_key + 1 for r in self._runs.values())])

    def get(self, run_id: str) -> RunState | None:
        return self._runs.get(run_id)

    def create(self, run_id: str, name: str = "", *, secret_hash: bytes | None = None,
               status: RunStatus = RunStatus.LIVE) -> RunState:
        run = RunState(run_key=self._next_key, run_id=run_id, name=name, secret_hash=secret_hash, status=status)
        self._next_key += 1
        self._runs[run_id] = run
        return run

    def __iter__(self):
        return iter(list(self._runs.values()))

    def __len__(self) -> int:
        return len(self._runs)
