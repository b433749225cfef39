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
from nissa_server.runs import RunRegistry, RunState

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

    def id_rows(self) -> Iterator[tuple]:
        """The rows as the ``events`` table takes them, id first."""
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
        stream = self.run.stream(self.rank)
        stream.stored = max(stream.stored, self.contiguous)
        if self.rows:
            store.committed_max_id = max(store.committed_max_id, self.last_id)
        store.published(self)
        if self.on_stored is not None:
            self.on_stored(stream.stored)

    def fail(self, err: BaseException) -> None:
        # Memory now claims seqs the file lacks: reload this stream before it is used again.
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
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nissa-writer")
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._task: asyncio.Task | None = None
        self.commits = 0

    # --- lifecycle -------------------------------------------------------------------------

    def open(self) -> None:
        """Create or migrate the file and load runs and stream state (before serving)."""
        self._conn = db.connect_writer(self.path)
        runs = writes.load_runs(self._conn)
        self.registry = RunRegistry(runs)
        self.next_id = writes.max_event_id(self._conn) + 1
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

    # --- writing ---------------------------------------------------------------------------

    @property
    def queue_depth(self) -> int:
        return self._queue.qsize() if self._queue is not None else 0

    async def submit(self, write: Write) -> None:
        """Queue a write; waits only when the writer is far behind (backpressure on ingest)."""
        assert self._queue is not None, "store not started"
        await self._queue.put(write)

    async def submit_and_wait(self, write: EventWrite) -> None:
        """Queue an event write and wait until it is committed (or raise why it was not)."""
        future: asyncio.Future = asyncio.get_running_loop().create_future()

        def stored(_: int) -> None:
            if not future.done():
                future.set_result(None)

        def failed(err: BaseException) -> None:
            if not future.done():
                future.set_exception(err)

        write.on_stored, write.on_failed = stored, failed
        await self.submit(write)
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
            # Ids are given here, in queue order, not when a write is built: a write built earlier
            # may reach the queue later, and watchers rely on ids being committed in order.
            for write in writes_:
                if isinstance(write, EventWrite):
                    write.first_id = self.next_id
                    self.next_id += len(write.rows)
            try:
                failures = await loop.run_in_executor(self._executor, self._commit, writes_)
                self.commits += 1
                for write, err in zip(writes_, failures):
                    if err is None:
                        write.settle(self)
                    else:
                        write.fail(err)
            finally:
                for _ in writes_:
                    self._queue.task_done()

    def _commit(self, batch: list[Write]) -> list[BaseException | None]:
        """One transaction for the whole batch; if it fails, retry each write alone to isolate the bad one."""
        try:
            self._transaction(batch)
            return [None] * len(batch)
        except Exception as err:  # noqa: BLE001 - any failure fails its writes; the writer must live on
            if len(batch) == 1:
                logger.error("store write failed: %s", err, exc_info=not isinstance(err, sqlite3.Error))
                return [err]
        return [self._commit([write])[0] for write in batch]

    def _transaction(self, batch: list[Write]) -> None:
        assert self._conn is not None
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            for write in batch:
                write.apply(self._conn)
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

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

