"""The SQLite store: one file in WAL mode, one server at a time (an OS lock says so), the embedded
default. Event ids are handed out in memory by the one writer, in queue order, which is commit order."""

from __future__ import annotations

import logging
import pathlib
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from nissa_server.store import histograms_sql, series_sql, sql, summaries_sql
from nissa_server.store import sqlite_schema as schema
from nissa_server.store.base import Store
from nissa_server.store.conn import Conn
from nissa_server.store.model import EventWrite, IdRange, UnusableDatabase, Write

logger = logging.getLogger(__name__)
T = TypeVar("T")

_INSERT_BLOCKS = "INSERT INTO event_blocks (id, run_key, rank, seq, n, body) VALUES (?,?,?,?,?,?)"


class SqliteStore(Store):
    backend = "sqlite"
    errors = (sqlite3.Error, UnusableDatabase)
    unavailable = (sqlite3.OperationalError, UnusableDatabase)  # locked, disk I/O, out of space …
    schema_version = schema.SCHEMA_VERSION

    def __init__(self, path: pathlib.Path, *, exclusive: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.path = pathlib.Path(path)
        self._exclusive = exclusive
        """Hold ``<db>.lock`` while open: the server does; maintenance beside a running server does not."""
        self._conn: schema.SqliteConn | None = None
        self._lock: schema.FileLock | None = None
        self._next_id = 1
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()

    def describe(self) -> str:
        return str(self.path)

    def open(self) -> None:
        if self._conn is not None:
            return
        if self.path.is_dir():
            raise UnusableDatabase(f"{self.path} is a directory, not a database file")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise UnusableDatabase(f"cannot create {self.path.parent}: {err.strerror}") from None
        lock = schema.lock(self.path) if self._exclusive else None
        try:
            conn = schema.connect_writer(self.path)
        except BaseException:
            if lock is not None:
                schema.unlock(lock)
            raise
        self._lock, self._conn = lock, conn
        conn.executescript(series_sql.schema_sql("BLOB", "INTEGER PRIMARY KEY") + histograms_sql.schema_sql())
        conn.execute("BEGIN IMMEDIATE")
        summaries_sql.backfill_once(conn)
        conn.execute("COMMIT")
        block = conn.execute("SELECT id + n - 1 FROM event_blocks ORDER BY id DESC LIMIT 1").fetchone()
        last = max(sql.read_counter(conn, "event_id"), block[0] if block else 0)
        series_sql.init_progress(conn, last)
        self.series_pass.mark = series_sql.watermark(conn)
        conn.execute("BEGIN IMMEDIATE")
        series_sql.index_labels(conn)
        histograms_sql.backfill_once(conn)
        conn.execute("COMMIT")
        self._next_id = last + 1
        self.published_upto = last

    def _close_connections(self) -> None:
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._lock is not None:
            schema.unlock(self._lock)
            self._lock = None

    # --- the writer's transaction ----------------------------------------------------------------

    def _writer(self) -> Conn:
        assert self._conn is not None, "store not open"
        return self._conn

    def _begin(self, conn: Conn) -> None:
        conn.execute("BEGIN IMMEDIATE")

    def _ids(self, conn: Conn) -> IdRange:
        return IdRange(self._next_id - 1)

    def _insert_blocks(self, conn: Conn, rows: list[tuple]) -> None:
        conn.executemany(_INSERT_BLOCKS, rows)

    def _commit(self, conn: Conn, ids: IdRange | None, batch: list[Write]) -> None:
        if ids is not None:
            sql.set_counter(conn, "event_id", ids.last)
        conn.execute("COMMIT")
        if ids is not None:
            self._next_id = ids.next

    def _rollback(self, conn: Conn) -> None:
        if isinstance(conn, sqlite3.Connection) and conn.in_transaction:
            conn.execute("ROLLBACK")

    def _stored(self, writes: list[EventWrite]) -> None:
        # One writer: commit order is id order, so the events can go out as they are settled.
        self.published_upto = max(self.published_upto, writes[-1].last_id)
        self.on_publish(writes)

    # --- reading ---------------------------------------------------------------------------------

    def _reader(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = schema.connect_reader(self.path)
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    def _read_sync(self, fn: Callable[..., T], *args: Any) -> T:
        return fn(self._reader(), *args)
