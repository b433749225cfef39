"""``Store``: the one interface the server has to its database, and the writer both backends share.

One writer task batches every write into few transactions (run on one thread, so the event loop never
waits on the database); reads run on worker threads with connections of their own. A backend says how to
connect, begin and commit, hand out event ids and insert blocks of events, and how committed events reach this
server's watchers (at once on SQLite; through the database's notifications on PostgreSQL, where other
servers commit too).
"""

from __future__ import annotations

import abc
import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from nissa_server.health import Health, supervise
from nissa_server.runs import RunRegistry, RunState
from nissa_server.store import series_split, sql
from nissa_server.store.conn import Conn
from nissa_server.store.model import (
    CallWrite,
    Committed,
    EventWrite,
    IdRange,
    Pending,
    RunGone,
    StaleWrite,
    Superseded,
    UnusableDatabase,
    Write,
)
from nissa_server.store.series_pass import SeriesPass
from nissa_server.store.series_sql import SeriesWriter

logger = logging.getLogger(__name__)
T = TypeVar("T")
Published = EventWrite | Committed
WRITER = "writer"
"""The writer task's part in ``Health`` (its transactions failing are the ``DATABASE``'s)."""
DATABASE = "database"
"""The database's part in ``Health``: degraded while the writer or a read finds it unavailable."""


def _rows(write: Write) -> int:
    return len(write.rows) if isinstance(write, EventWrite) else 1


class Gate:
    """An ``asyncio.Lock`` (FIFO) that also says whether anyone holds it or waits for it."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self.busy = 0
        """Tasks inside or waiting to enter."""

    async def __aenter__(self) -> None:
        self.busy += 1
        try:
            await self._lock.acquire()
        except BaseException:
            self.busy -= 1
            raise

    async def __aexit__(self, *exc: object) -> None:
        self._lock.release()
        self.busy -= 1


class Store(abc.ABC):
    """Owns the database: schema, the writer, the readers, and the cache of runs met so far."""

    backend: str = ""
    errors: tuple[type[Exception], ...] = (UnusableDatabase,)
    """What a store call raises when the database fails: the driver's errors, and ``UnusableDatabase`` (the
    writer cannot reconnect, the database being down)."""
    unavailable: tuple[type[Exception], ...] = (UnusableDatabase,)
    """The part of ``errors`` that says the database is away or busy (not a bug): a read answers 503."""
    schema_version: int = 0
    """The version of the schema this server brings its database to."""

    def __init__(self, queue_batches: int = 256, max_ops_per_commit: int = 512,
                 max_rows_per_commit: int = 16_000, commit_interval_s: float = 0.0,
                 series_interval_s: float | None = 1.0, health: Health | None = None,
                 max_retry_s: float = 30.0) -> None:
        self.health = health if health is not None else Health(self.unavailable)
        """Where the database's part (``DATABASE``) and the series pass's say whether they work."""
        self.max_retry_s = max_retry_s
        """Longest wait between tries of a background task of the store while it fails."""
        self.registry = RunRegistry()
        self.published_upto = 0
        """Highest event id handed to ``on_publish``: every id up to it is committed."""
        self.on_publish: Callable[[Sequence[Published]], None] = lambda batches: None
        """Committed events for this server's watchers: once per commit, batches in id order."""
        self.on_stream_taken: Callable[[int, int, str], None] = lambda run_key, rank, session: None
        """Another session (maybe on another server) took over (run key, rank)."""
        self.on_run_deleted: Callable[[int], None] = lambda run_key: None
        self.on_committed: Callable[[int, float], None] = lambda events, seconds: None
        """A transaction committed ``events`` events in ``seconds`` (for the writer's histograms)."""
        self._queue_batches = queue_batches
        self._max_ops = max_ops_per_commit
        # Bounds what one commit publishes at once: a backlog committed whole would reach every
        # watcher as one burst (closing any with less room than that as lagging) and delay acks.
        self._max_rows = max_rows_per_commit
        # Group commit: under load, writes that arrive within the interval share one transaction. A
        # transaction costs per stream and page it touches, not per row: fewer, larger ones cost less
        # per event (and a lone write after a quiet spell is committed at once).
        self._interval = commit_interval_s
        self._queue: asyncio.Queue[Write] | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nissa-writer")
        self._task: asyncio.Task | None = None
        self.ordered = Gate()
        """Held from building an event write until it is queued: FIFO, so build order is queue order. A
        write built while nobody is in it and queued at once (``ready``, ``put_now``) keeps that order too."""
        self.commits = 0
        self.series = SeriesWriter()
        """Series points and chart markers of the stored events, written by the series pass."""
        self.series_pass = SeriesPass(self, series_interval_s)
        self.series_per_part = series_split.SERIES_PER_PART
        """Series one transaction of a pass writes at most (``series_split``)."""

    # --- what a backend provides -------------------------------------------------------------

    @abc.abstractmethod
    def open(self) -> None:
        """Connect, check, create or migrate the schema (before serving). Raises ``UnusableDatabase``
        with a one-line reason; a second call does nothing."""

    @abc.abstractmethod
    def describe(self) -> str:
        """Where the data lives, for logs (no password)."""

    @abc.abstractmethod
    def _read_sync(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a query on a read connection of the calling thread."""

    @abc.abstractmethod
    def _writer(self) -> Conn:
        """The writer's connection (used only on the writer thread)."""

    @abc.abstractmethod
    def _begin(self, conn: Conn) -> None: ...

    @abc.abstractmethod
    def _commit(self, conn: Conn, ids: IdRange | None, batch: list[Write]) -> None:
        """Commit ``batch`` (durably: acks follow); ``ids``, when events were written, are the ids they took."""

    @abc.abstractmethod
    def _rollback(self, conn: Conn) -> None: ...

    @abc.abstractmethod
    def _ids(self, conn: Conn) -> IdRange:
        """Where this transaction's event ids start: from here to its commit, ids are handed out in
        commit order (no other transaction may take ids in between)."""

    @abc.abstractmethod
    def _insert_blocks(self, conn: Conn, rows: list[tuple]) -> None:
        """Insert ``event_blocks`` rows: (id, run_key, rank, seq, n, body)."""

    @abc.abstractmethod
    def _stored(self, writes: list[EventWrite]) -> None:
        """This server's writes of one commit, in id order: how their events reach ``on_publish``."""

    @abc.abstractmethod
    def _close_connections(self) -> None:
        """Close every connection (after the writer has stopped)."""

    def announce_deleted(self, conn: Conn, run_key: int) -> None:
        """Inside the transaction that deletes a run: tell the other servers (if any) at its commit."""
        return  # a store only one server writes has no one to tell

    def announce_taken(self, conn: Conn, run_key: int, rank: int, session: str) -> None:
        """Inside the transaction where ``session`` takes a stream over: tell the other servers at its commit."""
        return  # a store only one server writes has no one to tell

    def _started(self) -> None:
        """Hook: the writer task runs (a backend starts what else it needs on the loop)."""
        return  # a backend that needs nothing more on the loop

    # --- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        self._queue = asyncio.Queue(maxsize=self._queue_batches)
        # Supervised like every background task: a bug past a commit (in what it publishes) must not end the
        # writer, and with it every write to come.
        self._task = asyncio.create_task(supervise(self.health, WRITER, self._run, max_retry_s=self.max_retry_s),
                                         name="nissa-store-writer")
        self._started()
        self.series_pass.start()

    async def close(self) -> None:
        """Commit what is queued, stop the writer, close every connection."""
        if self._queue is not None and self._task is not None:
            await self.series_pass.stop()
            await self._queue.join()
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self._executor.shutdown(wait=True)
        self._close_connections()

    # --- writing -------------------------------------------------------------------------------

    @property
    def queue_depth(self) -> int:
        return self._queue.qsize() if self._queue is not None else 0

    async def submit(self, write: Write) -> None:
        """Queue a write; waits only when the writer is far behind (backpressure on ingest).

        Ingest writes go through ``submit_built``, which builds and queues them under ``ordered``: their stream
        state assumes they reach the writer in the order they were built.
        """
        assert self._queue is not None, "store not started"
        try:
            await self._queue.put(write)
        except BaseException as err:  # cancelled while waiting: never queued, yet counted by its stream
            write.fail(err)
            raise

    @property
    def ready(self) -> bool:
        """A write built now can be queued at once, in order: nobody is in ``ordered``, the queue has room."""
        return self._queue is not None and not self.ordered.busy and not self._queue.full()

    def put_now(self, write: Write) -> None:
        """Queue a write built since ``ready`` said so, with no suspension in between (the ingest path:
        no lock to take, no task switch)."""
        assert self._queue is not None, "store not started"
        self._queue.put_nowait(write)

    async def submit_built(self, build: Callable[[], EventWrite | None],
                           first: Callable[[], Awaitable[None]] | None = None) -> EventWrite | None:
        """Build an event write and queue it, in one order across every caller (see ``submit``): at once where
        ``ready`` (no suspension in between), else under ``ordered``. ``first`` runs before the build, in the same
        order (a read that must see this stream's earlier writes committed); a build of None queues nothing."""
        if first is None and self.ready:
            write = build()
            if write is not None:
                self.put_now(write)
            return write
        async with self.ordered:
            if first is not None:
                await first()
            write = build()
            if write is not None:
                await self.submit(write)
        return write

    async def submit_and_wait(self, write: EventWrite) -> EventWrite:
        """Queue an event write that builds its rows in the transaction; returns it once committed."""
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
        return write

    async def series_call(self, fn: Callable[[Conn], T]) -> T:
        """Run one of the series pass's writes (``SeriesWriter``) in a transaction: the writer's next, where
        one writer holds the database; a backend where writers do not block each other gives it its own."""
        return await self.call(fn)

    async def call(self, fn: Callable[[Conn], T]) -> T:
        """Run ``fn`` inside the writer's next transaction and return its result."""
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        await self.submit(CallWrite(fn=fn, future=future))
        return await future

    async def _run(self) -> None:
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        began = 0.0
        while True:
            writes_ = [await self._queue.get()]
            wait = began + self._interval - loop.time()
            if wait > 0 and self._queue.qsize() < self._max_ops:
                await asyncio.sleep(wait)
            began = loop.time()
            rows = _rows(writes_[0])
            while len(writes_) < self._max_ops and rows < self._max_rows and not self._queue.empty():
                writes_.append(self._queue.get_nowait())
                rows += _rows(writes_[-1])
            try:
                await self._write(loop, writes_)
            finally:
                for _ in writes_:
                    self._queue.task_done()
            self.health.ok(WRITER)  # a loop that runs for good says itself that it works again

    async def _write(self, loop: asyncio.AbstractEventLoop, batch: list[Write]) -> None:
        stale = [w for w in batch if isinstance(w, EventWrite) and w.stale]
        if stale:
            batch = [w for w in batch if w not in stale]
            for stale_write in stale:
                stale_write.fail(StaleWrite(f"an earlier write of run {stale_write.run_id!r} rank {stale_write.rank} "
                                            f"failed"))
        if not batch:
            return
        began = loop.time()
        failures = await loop.run_in_executor(self._executor, self._commit_batch, batch)
        self.commits += 1
        self.on_committed(sum(len(w.rows) for w, err in zip(batch, failures, strict=True)
                              if err is None and isinstance(w, EventWrite)), loop.time() - began)
        stored: list[EventWrite] = []
        for write, err in zip(batch, failures, strict=True):
            if err is None:
                write.settle(stored.append)
            else:
                write.fail(err)
        if stored:
            self.series_pass.remember(stored)
            self._stored(stored)

    def _commit_batch(self, batch: list[Write]) -> list[BaseException | None]:
        """One transaction for the whole batch; if it fails, retry each write alone to isolate the bad one."""
        try:
            self._transaction(batch)
            self.health.ok(DATABASE)
            return [None] * len(batch)
        except Exception as err:  # noqa: BLE001 - any failure fails its writes; the writer must live on
            if len(batch) == 1:
                self._log_failure(err)
                return [err]
        results: list[BaseException | None] = []
        broken: set[tuple[int, int]] = set()  # a stream's later writes assume its earlier ones landed
        for write in batch:
            key = (write.run.run_key, write.rank) if isinstance(write, EventWrite) else None
            if key in broken:
                results.append(StaleWrite("an earlier write of the same stream failed"))
                continue
            results.append(self._commit_batch([write])[0])
            if results[-1] is not None and key is not None:
                broken.add(key)
        return results

    def _log_failure(self, err: Exception) -> None:
        if isinstance(err, (Superseded, RunGone)):  # a fact about the stream, not a fault of the store
            logger.info("write refused: %s", err)
            return
        if isinstance(err, self.unavailable):  # every write fails while it lasts: said once, not per write
            self.health.failed(DATABASE, err)
            return
        logger.error("store write failed: %s", err, exc_info=not isinstance(err, self.errors))

    def _transaction(self, batch: list[Write]) -> None:
        conn = self._writer()
        self._begin(conn)
        try:
            ids = self._ids(conn) if any(isinstance(w, EventWrite) for w in batch) else None
            pending = Pending(self._insert_blocks)
            for write in batch:
                write.apply(conn, ids, pending)
            pending.flush(conn)
            self._commit(conn, ids if ids is not None and ids.used else None, batch)
        except BaseException:
            self._rollback(conn)
            self.series.forget()
            raise

    # --- reading -------------------------------------------------------------------------------

    def read_sync(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a query on a read connection of the calling thread."""
        try:
            result = self._read_sync(fn, *args)
        except self.unavailable as err:
            self.health.failed(DATABASE, err)
            raise
        self.health.ok(DATABASE)
        return result

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a query on a worker thread's read connection; the event loop never waits on the database."""
        return await asyncio.to_thread(self.read_sync, fn, *args)

    async def committed_upto(self) -> int:
        """Highest event id such that every id up to it is committed, as of now (at least
        ``published_upto``; more where events are published some time after their commit)."""
        return self.published_upto

    async def find_run(self, run_id: str) -> RunState | None:
        """The run ``run_id`` (from the cache, or the database: another server may have created it)."""
        run = self.registry.get(run_id)
        if run is not None:
            return run
        row = await self.read(sql.find_run, run_id)
        return None if row is None else self.registry.remember(row.run_key, row.run_id, row.name, row.secret_hash)
