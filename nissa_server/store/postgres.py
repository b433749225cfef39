"""The PostgreSQL store: one database that several servers share.

- Event ids are handed out under the row lock of ``counters('event_id')``, taken first in every
  transaction that stores events and held until it commits: ids are in commit order across every
  server, so a watcher reading ``id > cursor`` never passes a row that commits late.
- A commit that stores events sends ``NOTIFY nissa_events, 'first:last'``; every server (this one too)
  LISTENs, and publishes to its watchers what it has not yet published, up to ``last``: its own writes
  from memory, other servers' read back from the database, in id order.
- ``nissa_streams`` says a session took over a stream (the older one, wherever it is, closes);
  ``nissa_runs`` that a run was deleted.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import urllib.parse
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool

from nissa_server.health import retry_delay, supervise
from nissa_server.store import histograms_sql, queries, series_split, series_sql, sql
from nissa_server.store import postgres_schema as schema
from nissa_server.store.base import DATABASE, Store
from nissa_server.store.blocks import from_row
from nissa_server.store.conn import Conn
from nissa_server.store.model import Committed, EventWrite, IdRange, UnusableDatabase, Write

logger = logging.getLogger(__name__)
T = TypeVar("T")

EVENTS, STREAMS, RUNS = "nissa_events", "nissa_streams", "nissa_runs"
NOTIFICATIONS, PUBLISHER = "notifications", "publisher"
"""Parts in ``Health``: the listener's connection, and the publication of what it hears to watchers."""
_RESYNC = ""  # not a channel: the listener (re)connected, catch up with whatever was committed
_COPY = "COPY event_blocks (id, run_key, rank, seq, n, body) FROM STDIN (FORMAT BINARY)"
_COPY_TYPES = ["int8", "int8", "int4", "int8", "int4", "bytea"]
CATCH_UP_EVENTS = 5000
"""Events read back and published at once, at most (whole blocks: one more block may pass it)."""
READ_POOL = 8
OUTAGE_CONNECT_S = 2
"""While the database is found down, a read connects by itself, waiting this long at most (then 503)."""
RECONNECT_S = 5.0
"""The read pool gives up a series of reconnection tries after this long; the next read starts a new one (its
tries back off, doubling: a long outage must not leave it a minute between tries once the database is back)."""


@functools.lru_cache(maxsize=1024)
def _pg(query: str) -> str:
    return query.replace("%", "%%").replace("?", "%s")


class PgConn:
    """A psycopg connection behind the shared SQL's ``?`` placeholders (see ``store.conn``)."""

    for_update = " FOR UPDATE"
    greatest = "GREATEST"
    snapshot = "BEGIN ISOLATION LEVEL REPEATABLE READ"
    ilike = "ILIKE"

    def __init__(self, raw: psycopg.Connection) -> None:
        self.raw = raw

    def execute(self, query: str, params: Any = ()) -> psycopg.Cursor:
        return self.raw.execute(_pg(query), params)

    def execute_binary(self, query: str, params: Any = ()) -> psycopg.Cursor:
        """``execute`` with results in binary form: large blobs arrive as they are, not hex-encoded."""
        return self.raw.execute(_pg(query), params, binary=True)

    def executemany(self, query: str, params: Any) -> psycopg.Cursor:
        cur = self.raw.cursor()
        cur.executemany(_pg(query), list(params))
        return cur

    def insert_rows(self, query: str, rows: Sequence[Sequence[Any]]) -> None:
        """``executemany`` of an ``INSERT INTO t (columns) VALUES (?, …) …``: the rows copied (``COPY``) into a
        temporary table of those columns, then inserted from it by the same statement. psycopg's executemany runs its
        pipeline's Python for every row, and holds the interpreter's lock from the event loop meanwhile (a pass of a
        hundred thousand series: seconds of it); a copy formats rows in C. Inside a transaction (the table is dropped at
        its end). See ``store.conn.insert_many``."""
        into, _, rest = query.partition(" VALUES (")
        rest = rest.partition(")")[2]
        table, _, columns = into.removeprefix("INSERT INTO ").partition(" (")
        columns = columns.removesuffix(")")
        temporary = f"nissa_rows_{table}"
        self.raw.execute(f"CREATE TEMPORARY TABLE IF NOT EXISTS {temporary} ON COMMIT DROP AS SELECT {columns} "
                         f"FROM {table} WITH NO DATA")
        with self.raw.cursor().copy(f"COPY {temporary} ({columns}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        self.raw.execute(f"{into} SELECT {columns} FROM {temporary}{rest}")
        self.raw.execute(f"DELETE FROM {temporary}")


def redact(url: str) -> str:
    """The URL without its password, for logs and messages."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


class PostgresStore(Store):
    backend = "postgresql"
    errors = (psycopg.Error, UnusableDatabase)
    unavailable = (psycopg.OperationalError, UnusableDatabase)  # down, restarting, unreachable, pool timed out
    schema_version = schema.SCHEMA_VERSION

    def __init__(self, url: str, **kwargs: Any) -> None:
        kwargs.pop("exclusive", None)  # several servers share a database by design
        super().__init__(**kwargs)
        self.series_per_part = series_split.PG_SERIES_PER_PART
        self.url = url
        self._conn: PgConn | None = None
        self._pool: ConnectionPool | None = None
        self._local: dict[int, EventWrite] = {}
        """This server's committed writes by first id, until published (filled just before commit)."""
        self._notes: asyncio.Queue[tuple[str, str]] | None = None
        self._series_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nissa-series")
        self._series_conn: PgConn | None = None
        self._stop = threading.Event()
        self._listener: threading.Thread | None = None
        self._publisher: asyncio.Task | None = None

    def describe(self) -> str:
        return redact(self.url)

    def _connect(self, *, autocommit: bool) -> psycopg.Connection:
        try:
            conn = psycopg.connect(self.url, autocommit=autocommit, connect_timeout=10)
        except psycopg.Error as err:
            raise UnusableDatabase(f"cannot connect to {self.describe()}: {_first_line(err)}") from None
        # Acks follow commits: a commit must be on disk, whatever the database's default says.
        conn.execute("SET synchronous_commit TO on")
        if not autocommit:
            conn.commit()
        return conn

    def open(self) -> None:
        if self._conn is not None:
            return
        raw = self._connect(autocommit=False)
        try:
            schema.migrate(raw)
            schema.create_series_tables(raw)
            schema.backfill_lab(raw)
            self.published_upto = sql.read_counter(PgConn(raw), "event_id")
            series_sql.init_progress(PgConn(raw), self.published_upto)
            self.series_pass.mark = series_sql.watermark(PgConn(raw))
            series_sql.index_labels(PgConn(raw))
            histograms_sql.backfill_once(PgConn(raw))
            raw.commit()
        except psycopg.Error as err:
            raw.close()
            raise UnusableDatabase(f"{self.describe()} is not usable: {_first_line(err)}") from None
        except UnusableDatabase:
            raw.close()
            raise
        self._conn = PgConn(raw)
        self._pool = ConnectionPool(self.url, min_size=1, max_size=READ_POOL, kwargs={"autocommit": True},
                                    open=True, name="nissa-readers", reconnect_timeout=RECONNECT_S)

    def _started(self) -> None:
        loop = asyncio.get_running_loop()
        self._notes = asyncio.Queue()
        self._publisher = asyncio.create_task(self._publish_loop(), name="nissa-publisher")
        self._listener = threading.Thread(target=self._listen, args=(loop,), name="nissa-listener", daemon=True)
        self._listener.start()

    async def close(self) -> None:
        await super().close()
        self._stop.set()
        if self._publisher is not None:
            self._publisher.cancel()
            try:
                await self._publisher
            except asyncio.CancelledError:
                pass
        if self._listener is not None:
            await asyncio.to_thread(self._listener.join, 5)

    async def series_call(self, fn: Callable[[Conn], T]) -> T:
        # A connection of its own: the pass's rows and merges commit beside ingest's transactions, not in them.
        return await asyncio.get_running_loop().run_in_executor(self._series_executor, self._series_transaction, fn)

    def _series_transaction(self, fn: Callable[[Conn], T]) -> T:
        conn = self._series_conn = self._working(self._series_conn)
        try:
            result = fn(conn)
            conn.raw.commit()
            return result
        except BaseException:
            if not conn.raw.closed:
                conn.raw.rollback()
            self.series.forget()
            raise

    def _close_connections(self) -> None:
        self._series_executor.shutdown(wait=True)
        if self._series_conn is not None:
            self._series_conn.raw.close()
            self._series_conn = None
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        if self._conn is not None:
            self._conn.raw.close()
            self._conn = None

    # --- the writer's transaction ----------------------------------------------------------------

    def _writer(self) -> Conn:
        self._conn = self._working(self._conn)
        return self._conn

    def _working(self, conn: PgConn | None) -> PgConn:
        """``conn`` if it still works, else a new one. A restarting database closes the connections it
        holds; psycopg learns it only when one is next used, which would fail the first write (or series
        pass) after the database came back, though the database works."""
        if conn is not None and not (conn.raw.broken or conn.raw.closed):
            try:
                ConnectionPool.check_connection(conn.raw)  # one empty query: a round trip
                return conn
            except psycopg.Error:
                conn.raw.close()
        return PgConn(self._connect(autocommit=False))

    def _begin(self, conn: Conn) -> None:
        """psycopg opens the transaction with the first statement."""

    def _ids(self, conn: Conn) -> IdRange:
        # The lock on this row is held until commit: no other transaction, on any server, takes ids
        # before this one has committed.
        return IdRange(sql.read_counter(conn, "event_id"))

    def _insert_blocks(self, conn: Conn, rows: list[tuple]) -> None:
        assert isinstance(conn, PgConn)
        with conn.raw.cursor().copy(_COPY) as copy:
            copy.set_types(_COPY_TYPES)
            for row in rows:
                copy.write_row(row)

    def _commit(self, conn: Conn, ids: IdRange | None, batch: list[Write]) -> None:
        assert isinstance(conn, PgConn)
        local = []
        if ids is not None:
            sql.set_counter(conn, "event_id", ids.last)
            conn.execute("SELECT pg_notify(?, ?)", (EVENTS, f"{ids.start}:{ids.last}"))
            local = [w for w in batch if isinstance(w, EventWrite) and w.rows]
            for write in local:  # before the commit: its notification can only come after
                self._local[write.first_id] = write
        try:
            conn.raw.commit()
        except BaseException:
            for write in local:
                self._local.pop(write.first_id, None)
            raise

    def _rollback(self, conn: Conn) -> None:
        assert isinstance(conn, PgConn)
        if not conn.raw.closed:
            conn.raw.rollback()

    def _stored(self, writes: list[EventWrite]) -> None:
        """Published when their notification arrives, in id order with the other servers' commits."""

    def announce_deleted(self, conn: Conn, run_key: int) -> None:
        conn.execute("SELECT pg_notify(?, ?)", (RUNS, str(run_key)))

    def announce_taken(self, conn: Conn, run_key: int, rank: int, session: str) -> None:
        conn.execute("SELECT pg_notify(?, ?)", (STREAMS, f"{run_key}:{rank}:{session}"))

    # --- notifications -----------------------------------------------------------------------------

    def _listen(self, loop: asyncio.AbstractEventLoop) -> None:
        """The listener thread: forwards every notification to the loop, reconnecting when it must (after a
        backoff, said once per outage: ``Health``)."""
        assert self._notes is not None
        notes = self._notes

        def put(note: tuple[str, str]) -> None:
            loop.call_soon_threadsafe(notes.put_nowait, note)

        self.health.watch(NOTIFICATIONS)
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True, connect_timeout=10) as conn:
                    for channel in (EVENTS, STREAMS, RUNS):
                        conn.execute(f"LISTEN {channel}")
                    put((_RESYNC, ""))
                    self.health.ok(NOTIFICATIONS)
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=0.5):
                            put((note.channel, note.payload))
            except psycopg.Error as err:
                if not self._stop.is_set():
                    self._stop.wait(retry_delay(self.health.failed(NOTIFICATIONS, err), self.max_retry_s))
            except RuntimeError:  # the loop closed under us: the server is stopping
                return

    async def _publish_loop(self) -> None:
        await supervise(self.health, PUBLISHER, self._publish_next, max_retry_s=self.max_retry_s)

    async def _publish_next(self) -> None:
        """Publish what the next notification says (a failure is retried by the next one, or the resync that
        follows a reconnection: each catches up from ``published_upto``)."""
        assert self._notes is not None
        channel, payload = await self._notes.get()
        try:
            if channel == EVENTS:
                await self._catch_up(int(payload.rpartition(":")[2]))
            elif channel == _RESYNC:
                await self._catch_up(await self.read(sql.read_counter, "event_id"))
            elif channel == STREAMS:
                await self._stream_taken(payload)
            elif channel == RUNS:
                self.on_run_deleted(int(payload))
        except ValueError as err:  # not a payload of ours: nothing to retry
            logger.warning("notification %s %r not handled: %s", channel, payload, err)

    async def _stream_taken(self, payload: str) -> None:
        """A take-over, told with the session that holds the stream now: a note read late (a loaded listener)
        names an older take, and the connection that came after it here must not be closed for it."""
        key, rank, _ = payload.split(":", 2)
        run_key, rank_n = int(key), int(rank)
        run = self.registry.by_key(run_key)
        if run is None or rank_n not in run.connections:
            return  # no connection here to keep or close: no read
        holder = await self.read(sql.stream_holder, run_key, rank_n)
        if holder is not None:
            self.on_stream_taken(run_key, rank_n, holder)

    async def _catch_up(self, upto: int) -> None:
        """Publish every event up to id ``upto``, in id order: this server's from memory, others' read back."""
        while self.published_upto < upto:
            mine: list[EventWrite] = []
            while (write := self._local.pop(self.published_upto + 1, None)) is not None:
                mine.append(write)
                self.published_upto = write.last_id
            if mine:
                self.on_publish(mine)
                continue
            bound = min([upto, *(first - 1 for first in self._local if first > self.published_upto)])
            rows = await self.read(queries.committed_blocks, self.published_upto, bound, CATCH_UP_EVENTS)
            batches = _group(rows)
            if batches:
                self.published_upto = batches[-1].last_id
                self.on_publish(batches)
            if sum(block.n for batch in batches for block in batch.blocks) < CATCH_UP_EVENTS:
                self.published_upto = max(self.published_upto, bound)  # the rest was deleted meanwhile

    # --- reading ---------------------------------------------------------------------------------

    async def committed_upto(self) -> int:
        # Acks follow the commit, publication follows its notification: a client that was acked may ask
        # before this server has published. The counter as committed is where commits are (read without
        # the writers' row lock, which only a transaction taking ids needs).
        return max(self.published_upto, await self.read(_committed_ids))

    def _read_sync(self, fn: Callable[..., T], *args: Any) -> T:
        assert self._pool is not None, "store not open"
        if self.health.is_down(DATABASE):
            # The pool reconnects on a schedule of its own, backing off: a read meanwhile connects by itself, so
            # that it answers at once (503, or the data as soon as the database is back).
            with psycopg.connect(self.url, autocommit=True, connect_timeout=OUTAGE_CONNECT_S) as direct:
                return fn(PgConn(direct), *args)
        for tries_left in range(READ_POOL, -1, -1):
            with self._pool.connection() as raw:
                try:
                    return fn(PgConn(raw), *args)
                except psycopg.OperationalError:
                    # A pooled connection the database closed when it restarted: the pool drops it, another
                    # one (or a new one) serves the read. Reads change nothing: trying again is safe.
                    if not raw.broken or not tries_left:
                        raise
        raise AssertionError("unreachable")


def _committed_ids(conn: Conn) -> int:
    return int(conn.execute("SELECT value FROM counters WHERE name = 'event_id'").fetchone()[0])


def _group(rows: list[tuple]) -> list[Committed]:
    """Blocks read back (id order) as batches of one stream with consecutive ids."""
    out: list[Committed] = []
    for run_key, run_id, rank, *columns in rows:
        block = from_row(columns)
        last = out[-1] if out else None
        if last is None or (last.run_key, last.rank) != (run_key, rank) or last.last_id + 1 != block.first_id:
            last = Committed(run_id=run_id, run_key=run_key, rank=rank, blocks=[])
            out.append(last)
        last.blocks.append(block)
    return out
