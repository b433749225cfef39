"""What the store's writer takes (event writes and calls), what it publishes, and the errors that fail
a write."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from leyline import Event
from nissa_server.runs import RunState, Stream
from nissa_server.store import histograms_sql, sql
from nissa_server.store.blocks import Block, BlockSpan, Row, pack
from nissa_server.store.conn import Conn

__all__ = ["Block", "Row"]


class UnusableDatabase(Exception):
    """The database cannot be served: in use by another server, not a database, corrupt, unreachable or
    from a newer server. The message is one line that says which and what to do."""


class StaleWrite(RuntimeError):
    """A write refused unapplied because an earlier write of its stream failed or was replaced."""


class RunGone(StaleWrite):
    """The write's run was deleted meanwhile (an upload that said hello before a ``DELETE``): final."""


class Superseded(RuntimeError):
    """Another connection, on this server or another, has taken over the write's stream."""


class IdRange:
    """Event ids handed out inside one transaction, in order, from one past ``last``."""

    def __init__(self, last: int) -> None:
        self.start = self.next = last + 1

    def take(self, n: int) -> int:
        first, self.next = self.next, self.next + n
        return first

    @property
    def last(self) -> int:
        return self.next - 1

    @property
    def used(self) -> bool:
        return self.next > self.start


Prepare = Callable[[Conn, "EventWrite"], None]


@dataclass(eq=False)
class EventWrite:
    """One batch of one (run, rank), with everything its transaction must also update.

    An ingest write carries rows built from accepted events and the session's fence; a write of the
    server's own events (``prepare``) builds its rows inside the transaction, where its seqs are given.
    Its ids are given in the transaction too, one per row in order; its rows are stored as ``blocks``.
    """

    run: RunState
    rank: int
    rows: list[Row] = field(default_factory=list)
    """The events, seqs increasing: (seq, kind, severity rank, body)."""
    contiguous: int = 0
    last_seq: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    effects: list[Event] = field(default_factory=list)
    stream: Stream | None = None
    """The ingest session's stream state this write was built on; None for the server's own events."""
    session: str | None = None
    """The session that must still hold the stream when this commits (the fence); None: no fence."""
    last_step: int = 0
    last_epoch: int = 0
    touch: bool = False
    """A live trainer's events: the run was seen now, at this step and epoch."""
    prepare: Prepare | None = None
    """Builds the rows inside the transaction (the server's events) or leaves none (refused)."""
    on_stored: Callable[[int], None] | None = None
    on_failed: Callable[[BaseException], None] | None = None
    first_id: int = 0
    blocks: list[Block] = field(default_factory=list)
    """The rows as stored, numbered from ``first_id`` (set in the transaction)."""
    decoded: list[tuple[Any, Any]] | None = None
    """(envelope, payload) of each row, as ingest validated them, where it kept them: the series pass reads
    their points without decoding the stored JSON again."""
    result: Any = None
    """What ``prepare`` decided, for whoever waits on the write."""

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def last_id(self) -> int:
        return self.first_id + len(self.rows) - 1

    @property
    def stale(self) -> bool:
        """Built on stream state that a failure or a newer session has since made untrustworthy."""
        stream = self.stream
        return stream is not None and (stream.broken or self.run.streams.get(self.rank) is not stream)

    def apply(self, conn: Conn, ids: IdRange | None, pending: Pending) -> None:
        if ids is None:
            raise RuntimeError("a transaction with event writes reads its id range first")
        if self.prepare is not None:
            pending.flush(conn)  # what it reads (the server's stream, commands) must be up to date
            self.rows, self.kinds, self.effects = [], {}, []
            self.prepare(conn, self)
        if not self.rows:
            return
        self.first_id = ids.take(len(self.rows))  # a retried transaction numbers the rows anew
        self.blocks = pack(self.rows, self.first_id)
        for event in self.effects:
            sql.apply_effect(conn, self.run.run_key, event)
        pending.add(conn, self)
        if self.prepare is not None:
            pending.flush(conn)

    def settle(self, stored: Callable[[EventWrite], None]) -> None:
        stream = self.stream
        if stream is not None:
            stream.stored = max(stream.stored, self.contiguous)
        if self.rows:
            stored(self)  # published after every write of the commit has settled
        if self.on_stored is not None:
            self.on_stored(stream.stored if stream is not None else self.last_seq)

    def fail(self, err: BaseException) -> None:
        # Memory now claims seqs the database lacks: this session's later writes must not commit.
        if self.stream is not None and self.run.streams.get(self.rank) is self.stream:
            self.stream.broken = True
        if self.on_failed is not None:
            self.on_failed(err)


@dataclass(eq=False)
class CallWrite:
    """Any other write: ``fn(conn)`` inside the writer's transaction, its result to a future."""

    fn: Callable[[Conn], Any]
    future: asyncio.Future
    result: Any = None

    def apply(self, conn: Conn, ids: IdRange | None, pending: Pending) -> None:
        pending.flush(conn)  # it may read what the writes before it in this transaction wrote
        self.result = self.fn(conn)

    def settle(self, stored: Callable[[EventWrite], None]) -> None:
        if not self.future.done():
            self.future.set_result(self.result)

    def fail(self, err: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(err)


Write = EventWrite | CallWrite


class Pending:
    """What the event writes of one transaction add: their blocks, and to their streams, kind counts and
    runs, gathered and written once per stream and per run (not once per write) before anything else
    reads them."""

    def __init__(self, insert: Callable[[Conn, list[tuple]], None]) -> None:
        self._insert = insert
        self.blocks: list[tuple] = []
        """Rows of ``event_blocks`` not inserted yet: (id, run_key, rank, seq, n, body)."""
        self.rare: list[tuple] = []
        """Rows of ``rare_events`` not inserted yet."""
        self.histograms: list[tuple] = []
        """Rows of ``histogram_index`` not inserted yet."""
        self._streams: dict[tuple[int, int], tuple[EventWrite, int]] = {}
        self._kinds: dict[int, dict[str, int]] = {}
        self._runs: dict[int, tuple[EventWrite, int, int]] = {}
        self._unfenced: list[EventWrite] = []

    def add(self, conn: Conn, write: EventWrite) -> None:
        key, rank = write.run.run_key, write.rank
        stream = (key, rank)
        earlier = self._streams.get(stream)
        if earlier is not None and earlier[0].session != write.session:
            self.flush(conn)  # another session's writes: each is checked against its own fence
            earlier = None
        nbytes = 0
        for block in write.blocks:
            self.blocks.append((block.first_id, key, rank, block.seq, block.n, block.body))
            nbytes += block.nbytes
        if not write.kinds.keys().isdisjoint(sql.INDEXED_KIND_SET):
            self.rare.extend((key, kind, seq, rank, i, severity, body) for i, (seq, kind, severity, body)
                             in enumerate(write.rows, write.first_id) if kind in sql.INDEXED_KIND_SET)
        if histograms_sql.HISTOGRAM in write.kinds:
            self.histograms += histograms_sql.index_rows(key, rank, write.first_id, write.rows)
        if write.session is None:
            self._unfenced.append(write)
        self._streams[stream] = (write, nbytes + (earlier[1] if earlier else 0))
        counts = self._kinds.setdefault(key, {})
        for kind, n in write.kinds.items():
            counts[kind] = counts.get(kind, 0) + n
        if write.touch:
            seen = self._runs.get(key)
            step, epoch = write.last_step, write.last_epoch
            self._runs[key] = (write, max(step, seen[1]) if seen else step, max(epoch, seen[2]) if seen else epoch)

    def flush(self, conn: Conn) -> None:
        # Streams first: on PostgreSQL that locks each stream's row, so a write without a fence (an
        # upload) checks for seqs stored already only once any other writer of its stream has committed.
        fenced = [(key, rank, write.session, write.last_seq, write.contiguous, nbytes)
                  for (key, rank), (write, nbytes) in self._streams.items() if write.session is not None]
        held = sql.update_streams(conn, fenced) if fenced else set()
        for (key, rank), (write, nbytes) in self._streams.items():
            if write.session is None:
                sql.update_stream_unfenced(conn, key, rank, write.last_seq, write.contiguous, nbytes)
            elif (key, rank) not in held:
                raise Superseded(f"run {write.run_id!r} rank {rank} was taken over by a newer connection")
        for write in self._unfenced:
            for block in write.blocks:
                if sql.seqs_stored(conn, write.run.run_key, write.rank, block.seq, block.last_seq):
                    raise StaleWrite(f"seqs {block.seq}..{block.last_seq} of run {write.run_id!r} rank "
                                     f"{write.rank} are stored already")
        if self.blocks:
            self._insert(conn, self.blocks)
        if self.rare:
            sql.insert_rare(conn, self.rare)
        if self.histograms:
            histograms_sql.insert(conn, self.histograms)
        if self._kinds:
            sql.count_kinds(conn, [(key, kind, n) for key, counts in self._kinds.items() for kind, n in counts.items()])
        if self._runs:
            seen = sql.touch_runs(conn, [(key, step, epoch) for key, (_, step, epoch) in self._runs.items()])
            gone = [write for key, (write, _, _) in self._runs.items() if key not in seen]
            if gone:
                raise RunGone(f"run {gone[0].run_id!r} was deleted on this server: start a new run")
        self.blocks, self.rare, self.histograms, self._unfenced = [], [], [], []
        self._streams.clear()
        self._kinds.clear()
        self._runs.clear()


@dataclass(eq=False)
class Committed(BlockSpan):
    """Blocks another server committed, read back for this server's watchers: one stream (run and rank),
    consecutive ids."""

    run_id: str
    run_key: int
    rank: int
    blocks: list[Block]

    @functools.cached_property
    def rows(self) -> list[Row]:
        """Each event with its kind and severity (read from its JSON: only filtered watchers need them)."""
        return [row for block in self.blocks for row in block.rows()]

    @functools.cached_property
    def kinds(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for row in self.rows:
            counts[row[1]] = counts.get(row[1], 0) + 1
        return counts


def migration_line(current: int, target: int) -> str:
    """What a server says, once, when it brings a database to its schema."""
    if current == 0:
        return f"creating the database (schema v{target})"
    return f"migrating the database from schema v{current} to v{target}"
