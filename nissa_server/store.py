"""The SQLite store: one writer task that batches every write into few transactions, and readers
on their own connections (one per reader thread), so replay and queries never block ingest."""

from __future__ import annotations

import asyncio
import functools
import logging
import pathlib
import sqlite3
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from leyline import Event
from nissa_server import db, writes
from nissa_server.runs import RunRegistry, RunState, Stream

logger = logging.getLogger(__name__)
T = TypeVar("T")

# Rows of ``events`` without their id: (run_key, rank, seq, kind, severity rank, ts, body). The ids
# are given when the writer takes the write (``first_id``), in queue order.
Row = tuple[int, int, int, str, int, float, bytes]


@dataclass(eq=False)
class EventWrite:
    """One accepted batch of one (run, rank), with everything the transaction must also update."""

    run: RunState
    rank: int
    stream: Stream
    """The stream state this write was built on; if it has been dropped since, so is the write."""
    rows: list[Row]
    contiguous: int
    last_seq: int
    kinds: dict[str, int]
    effects: list[Event] = field(default_factory=list)
    touch: bool = True
    before: Callable[[sqlite3.Connection], None] | None = None
    """Another write that must commit atomically with these events (a new command's row)."""
    on_stored: Callable[[int], None] | None = None
    on_failed: Callable[[BaseException], None] | None = None
    first_id: int = 0
    """Id of the first row; rows are numbered on from it when the writer takes the write."""

    @property
    def last_id(self) -> int:
        return self.first_id + len(self.rows) - 1

    @property
    def stale(self) -> bool:
        """Built on stream state that a failed write has since made untrustworthy."""
        return self.rank in self.run.dirty or self.run.streams.get(self.rank) is not self.stream

    def id_rows(self) -> Iterator[tuple]:
        """The rows as the ``events`` table takes them, id first."""
        assert self.first_id > 0, "rows are numbered when the writer takes the write"
        return ((i, *row) for i, row in enumerate(self.rows, self.first_id))

    @functools.cached_property
    def items(self) -> list[tuple[int, bytes]]:
        """(id, body) pairs, built once and shared by every watcher that takes the whole batch."""
        return [(i, row[6]) for i, row in enumerate(self.rows, self.first_id)]

    def apply(self, conn: sqlite3.Connection) -> None:
        if self.before is not None:
            self.before(conn)
        writes.store_events(conn, self)

    def settle(self, store: Store) -> None:
        stream = self.stream
        stream.stored = max(stream.stored, self.contiguous)
        if self.rows:
            store.committed_max_id = max(store.committed_max_id, self.last_id)
        store.published(self)
        if self.on_stored is not None:
            self.on_stored(stream.stored)

    def fail(self, err: BaseException) -> None:
        # Memory now claims seqs the file lacks: reload this stream before it is used again
        # (unless it was reloaded already: a stale write's claims went with the old state).
        if self.run.streams.get(self.rank) is self.stream:
            self.run.dirty.add(self.rank)
        if self.on_failed is not None:
            self.on_failed(err)


@dataclass(eq=False)
class CallWrite:
    """Any other write: ``fn(conn)`` inside the writer's transaction, its result to a future."""

    fn: Callable[[sqlite3.Connection], Any]
    future: asyncio.Future
    result: Any = None

    def apply(self, conn: sqlite3.Connection) -> None:
        self.result = self.fn(conn)

    def settle(self, store: Store) -> None:
        if not self.future.done():
            self.future.set_result(self.result)

    def fail(self, err: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(err)


Write = EventWrite | CallWrite


class StaleWrite(RuntimeError):
    """A write refused unapplied because an earlier write of its stream failed."""


def _rows(write: Write) -> int:
    return len(write.rows) if isinstance(write, EventWrite) else 1


class Store:
    """Owns the database file: schema, the in-memory run registry it loads, the writer, the readers."""

    def __init__(self, path: pathlib.Path, queue_batches: int = 256, max_ops_per_commit: int = 512,
                 max_rows_per_commit: int = 16_000) -> None:
        self.path = path
        self.committed_max_id = 0
        self.next_id = 1
        self.registry = RunRegistry()
        self.on_publish: Callable[[EventWrite], None] = lambda write: None
        self._queue_batches = queue_batches
        self._max_ops = max_ops_per_commit
        # Bounds what one commit publishes at once: a backlog committed whole would reach every
        # watcher as one burst (closing any with less room than that as lagging) and delay acks.
        self._max_rows = max_rows_per_commit
        self._queue: asyncio.Queue[Write] | None = None
        self._conn: sqlite3.Connection | None = None
        self._lock: int | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nissa-writer")
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._task: asyncio.Task | None = None
        self.ordered = asyncio.Lock()
        """Held from building an event write until it is queued: FIFO, so build order is queue order."""
        self.commits = 0

    # --- lifecycle -------------------------------------------------------------------------

    def open(self) -> None:
        """Lock, check, create or migrate the file and load runs and stream state (before serving).

        Raises ``db.UnusableDatabase`` with a one-line reason; a second call does nothing.
        """
        if self._conn is not None:
            return
        if self.path.is_dir():
            raise db.UnusableDatabase(f"{self.path} is a directory, not a database file")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise db.UnusableDatabase(f"cannot create {self.path.parent}: {err.strerror}") from None
        lock = db.lock(self.path)
        try:
            conn = db.connect_writer(self.path)
        except BaseException:
            db.unlock(lock)
            raise
        self._lock, self._conn = lock, conn
        self.registry = RunRegistry(writes.load_runs(conn))
        self.next_id = writes.max_event_id(conn) + 1
        self.committed_max_id = self.next_id - 1

    def start(self) -> None:
        self._queue = asyncio.Queue(maxsize=self._queue_batches)
        self._task = asyncio.create_task(self._run(), name="nissa-store-writer")

    async def close(self) -> None:
        """Commit what is queued, stop the writer, close every connection."""
        if self._queue is not None and self._task is not None:
            await self._queue.join()
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self._executor.shutdown(wait=True)
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._lock is not None:
            db.unlock(self._lock)
            self._lock = None

    # --- writing ---------------------------------------------------------------------------

    @property
    def queue_depth(self) -> int:
        return self._queue.qsize() if self._queue is not None else 0

    async def submit(self, write: Write) -> None:
        """Queue a write; waits only when the writer is far behind (backpressure on ingest).

        Event writes must be built and submitted under ``ordered`` (or through ``submit_built``):
        their stream state assumes they reach the writer in the order they were built.
        """
        assert self._queue is not None, "store not started"
        try:
            await self._queue.put(write)
        except BaseException as err:  # cancelled while waiting: never queued, yet counted by its stream
            write.fail(err)
            raise

    async def submit_built(self, build: Callable[[], EventWrite]) -> EventWrite:
        """Build an event write and queue it, in one order across every caller (see ``submit``)."""
        async with self.ordered:
            write = build()
            await self.submit(write)
        return write

    async def submit_and_wait(self, build: Callable[[], EventWrite]) -> None:
        """Build and queue an event write as ``submit_built``, then wait until it is committed."""
        future: asyncio.Future = asyncio.get_running_loop().create_future()

        def stored(_: int) -> None:
            if not future.done():
                future.set_result(None)

        def failed(err: BaseException) -> None:
            if not future.done():
                future.set_exception(err)

        def built() -> EventWrite:
            write = build()
            write.on_stored, write.on_failed = stored, failed
            return write

        await self.submit_built(built)
        await future

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` inside the writer's next transaction and return its result."""
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        await self.submit(CallWrite(fn=fn, future=future))
        return await future

    async def resync(self, run: RunState, rank: int) -> None:
        """Reload a stream whose write failed, once every write queued before this call has settled."""
        if rank in run.dirty:
            run.streams[rank] = await self.call(lambda conn: writes.load_stream(conn, run.run_key, rank))
            run.dirty.discard(rank)

    def published(self, write: EventWrite) -> None:
        self.on_publish(write)

    async def _run(self) -> None:
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        while True:
            writes_ = [await self._queue.get()]
            rows = _rows(writes_[0])
            while len(writes_) < self._max_ops and rows < self._max_rows and not self._queue.empty():
                writes_.append(self._queue.get_nowait())
                rows += _rows(writes_[-1])
            try:
                await self._write(loop, writes_)
            finally:
                for _ in writes_:
                    self._queue.task_done()

    async def _write(self, loop: asyncio.AbstractEventLoop, batch: list[Write]) -> None:
        stale = [w for w in batch if isinstance(w, EventWrite) and w.stale]
        if stale:
            batch = [w for w in batch if w not in stale]
            for write in stale:
                write.fail(StaleWrite(f"an earlier write of run {write.run.run_id!r} rank {write.rank} failed"))
        # Ids are given here, in queue order, so that watchers see them committed in order.
        for write in batch:
            if isinstance(write, EventWrite):
                write.first_id = self.next_id
                self.next_id += len(write.rows)
        if not batch:
            return
        failures = await loop.run_in_executor(self._executor, self._commit, batch)
        self.commits += 1
        for write, err in zip(batch, failures):
            if err is None:
                write.settle(self)
            else:
                write.fail(err)

    def _commit(self, batch: list[Write]) -> list[BaseException | None]:
        """One transaction for the whole batch; if it fails, retry each write alone to isolate the bad one."""
        try:
            self._transaction(batch)
            return [None] * len(batch)
        except Exception as err:  # noqa: BLE001 - any failure fails its writes; the writer must live on
            if len(batch) == 1:
                logger.error("store write failed: %s", err, exc_info=not isinstance(err, sqlite3.Error))
                return [err]
        results: list[BaseException | None] = []
        broken: set[tuple[int, int]] = set()  # a stream's later writes assume its earlier ones landed
        for write in batch:
            key = (write.run.run_key, write.rank) if isinstance(write, EventWrite) else None
            if key in broken:
                results.append(StaleWrite("an earlier write of the same stream failed"))
                continue
            results.append(self._commit([write])[0])
            if results[-1] is not None and key is not None:
                broken.add(key)
        return results

    def _transaction(self, batch: list[Write]) -> None:
        assert self._conn is not None
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            for write in batch:
                write.apply(self._conn)
            self._conn.execute("COMMIT")
        except BaseException:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise

    # --- reading ---------------------------------------------------------------------------

    def _reader(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = db.connect_reader(self.path)
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    def read_sync(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a query on this thread's own read connection."""
        return fn(self._reader(), *args)

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a query on a worker thread's read connection; the event loop never waits on SQLite."""
        return await asyncio.to_thread(self.read_sync, fn, *args)

