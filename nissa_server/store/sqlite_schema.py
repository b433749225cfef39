"""SQLite schema, migrations and connections. The schema version lives in ``PRAGMA user_version``."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import pathlib
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from nissa_server.store import run_meta_sql, summaries_sql
from nissa_server.store.alerts_sql import ALERTS_SCHEMA
from nissa_server.store.blocks import regroup
from nissa_server.store.history import DELETED_RUNS_SCHEMA
from nissa_server.store.model import UnusableDatabase, migration_line
from nissa_server.store.ranks_sql import RANKS_SCHEMA
from nissa_server.store.sql import INDEXED_KIND_SET, INDEXED_KINDS_SQL, insert_rare

logger = logging.getLogger(__name__)


class SqliteConn(sqlite3.Connection):
    """A connection that tells the shared SQL how SQLite spells what differs (see ``store.conn``)."""

    for_update = ""  # one writer holds the whole file while it writes
    greatest = "MAX"
    snapshot = "BEGIN"  # WAL: the reads that follow see one commit
    ilike = "LIKE"


def _run_script(conn: sqlite3.Connection, script: str) -> None:
    # Not executescript(): it commits first, and a migration must stay one transaction.
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


def _v1(conn: sqlite3.Connection) -> None:
    _run_script(
        conn,
        """
        CREATE TABLE runs (
            run_key INTEGER PRIMARY KEY,
            run_id TEXT NOT NULL UNIQUE,
            name TEXT NOT NULL DEFAULT '',
            status TEXT NOT NULL DEFAULT 'live',
            created_at REAL NOT NULL,
            started_at REAL,
            ended_at REAL,
            last_seen_at REAL NOT NULL,
            last_step INTEGER NOT NULL DEFAULT 0,
            last_epoch INTEGER NOT NULL DEFAULT 0,
            config BLOB,
            finish BLOB,
            hub_health BLOB
        );
        -- id is the global ingest order and the watch cursor.
        CREATE TABLE events (
            id INTEGER PRIMARY KEY,
            run_key INTEGER NOT NULL,
            rank INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            kind TEXT NOT NULL,
            severity INTEGER NOT NULL,
            ts REAL NOT NULL,
            body BLOB NOT NULL
        );
        CREATE UNIQUE INDEX events_stream ON events (run_key, rank, seq);
        CREATE INDEX events_kind ON events (run_key, kind, seq);
        CREATE TABLE streams (
            run_key INTEGER NOT NULL,
            rank INTEGER NOT NULL,
            last_seq INTEGER NOT NULL,
            contiguous INTEGER NOT NULL,
            PRIMARY KEY (run_key, rank)
        ) WITHOUT ROWID;
        CREATE TABLE kind_counts (
            run_key INTEGER NOT NULL,
            kind TEXT NOT NULL,
            n INTEGER NOT NULL,
            PRIMARY KEY (run_key, kind)
        ) WITHOUT ROWID;
        CREATE TABLE commands (
            command_id TEXT PRIMARY KEY,
            run_key INTEGER NOT NULL,
            action TEXT NOT NULL,
            status TEXT NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            request BLOB NOT NULL,
            applied_step INTEGER,
            result BLOB,
            message TEXT NOT NULL DEFAULT '',
            history BLOB NOT NULL,
            idempotency_key TEXT UNIQUE
        );
        CREATE INDEX commands_run ON commands (run_key, status);
        CREATE TABLE artifacts (
            run_key INTEGER NOT NULL,
            name TEXT NOT NULL,
            size INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (run_key, name)
        ) WITHOUT ROWID;
        """
    )


def _v2(conn: sqlite3.Connection) -> None:
    # Watch replay of one run walks events in id order; an index on run_key alone is
    # (run_key, rowid) inside SQLite, so it serves exactly that.
    conn.execute("CREATE INDEX events_run ON events (run_key)")


def _v3(conn: sqlite3.Connection) -> None:
    # SHA-256 of the run's stream secret; NULL for a run stored before streams had one (the first
    # connection that presents a secret binds it, see nissa_server.ingest).
    conn.execute("ALTER TABLE runs ADD COLUMN secret_hash BLOB")


def _v4(conn: sqlite3.Connection) -> None:
    # Several sessions (and servers, on PostgreSQL) meet at a stream: the one that holds it (the fence
    # its writes check) and until when; the bytes its events take; counters that never hand a key or an
    # event id out twice, even once the rows that had the highest are deleted.
    _run_script(
        conn,
        """
        ALTER TABLE streams ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE streams ADD COLUMN session TEXT;
        ALTER TABLE streams ADD COLUMN held_until REAL;
        UPDATE streams SET bytes = (SELECT COALESCE(SUM(length(body)), 0) FROM events e
                                    WHERE e.run_key = streams.run_key AND e.rank = streams.rank);
        CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
        INSERT INTO counters VALUES ('event_id', (SELECT COALESCE(MAX(id), 0) FROM events)),
                                    ('run_key', (SELECT COALESCE(MAX(run_key), 0) FROM runs))
        """,
    )


def _v5(conn: sqlite3.Connection) -> None:
    # Only the rare kinds are indexed by kind (``indexed`` in ``leyline.kinds``): a metric event stored
    # updates one B-tree less.
    conn.execute("DROP INDEX events_kind")
    conn.execute(f"CREATE INDEX events_kind ON events (run_key, kind, seq) WHERE {INDEXED_KINDS_SQL}")


def _v6(conn: sqlite3.Connection) -> None:
    # Runs of several ranks (torchrun): how many ranks, why the status is what it is (the rank named), the
    # state of each rank, and each rank's status of each command (see store.ranks_sql).
    _run_script(conn, RANKS_SCHEMA.format(key="INTEGER", real="REAL", blob="BLOB", rowid=" WITHOUT ROWID"))


def _v7(conn: sqlite3.Connection) -> None:
    # Events in blocks (see store.blocks): a row per write of a stream, not per event, and the rare kinds
    # once more, a row each, for the queries by kind. The events stored so far are regrouped.
    _run_script(
        conn,
        """
        -- id is the block's first event id: its events have ids id .. id + n - 1 and seqs seq .. seq + n - 1.
        CREATE TABLE event_blocks (
            id INTEGER PRIMARY KEY,
            run_key INTEGER NOT NULL,
            rank INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            n INTEGER NOT NULL,
            body BLOB NOT NULL
        );
        CREATE UNIQUE INDEX event_blocks_stream ON event_blocks (run_key, rank, seq);
        CREATE INDEX event_blocks_run ON event_blocks (run_key);
        CREATE TABLE rare_events (
            run_key INTEGER NOT NULL,
            kind TEXT NOT NULL,
            seq INTEGER NOT NULL,
            rank INTEGER NOT NULL,
            id INTEGER NOT NULL,
            severity INTEGER NOT NULL,
            body BLOB NOT NULL,
            PRIMARY KEY (run_key, kind, seq, rank)
        )
        """,
    )
    rows = conn.execute("SELECT id, run_key, rank, seq, kind, severity, body FROM events ORDER BY run_key, rank, seq")
    for block, rare in regroup(rows, INDEXED_KIND_SET):
        conn.execute("INSERT INTO event_blocks (id, run_key, rank, seq, n, body) VALUES (?,?,?,?,?,?)", block)
        insert_rare(conn, rare)
    conn.execute("DROP TABLE events")


def _v8(conn: sqlite3.Connection) -> None:
    # Deleted runs are remembered: their streams are refused, their ids never claimed again.
    conn.execute(DELETED_RUNS_SCHEMA.format(real="REAL"))


def _v9(conn: sqlite3.Connection) -> None:
    # Alerts, their notifications and every delivery attempt (see store.alerts_sql).
    _run_script(conn, ALERTS_SCHEMA.format(key="INTEGER", real="REAL", rowid=""))


def _v10(conn: sqlite3.Connection) -> None:
    # A lab's runs: project, group, tags, notes, config entries a row each, every series summarised (see
    # store.run_meta_sql and store.summaries_sql; what was stored before is copied there at the next open).
    types = {"key": "INTEGER", "real": "REAL", "rowid": " WITHOUT ROWID"}
    _run_script(conn, run_meta_sql.SCHEMA.format(**types))
    _run_script(conn, summaries_sql.SCHEMA.format(**types))


# Append only: migration N takes a database from version N-1 to N.
MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (_v1, _v2, _v3, _v4, _v5, _v6, _v7, _v8, _v9, _v10)
SCHEMA_VERSION = len(MIGRATIONS)


def _tune(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA journal_mode=WAL")
    # NORMAL in WAL mode: a commit survives a crash of this process; only a power cut may lose the last ones.
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=10000")
    conn.execute("PRAGMA foreign_keys=OFF")


PAGE_BYTES = 16384
"""Page size of a new file: a commit is fewer, larger WAL frames (5% more events/s at ingest than 4 KiB)."""
WAL_CHECKPOINT_BYTES = 16 * 1024 * 1024


_HELD: set[tuple[int, int]] = set()
"""(device, inode) of the database files this process holds: a second store here is refused before it
opens the file, since closing any descriptor of a file drops every POSIX lock SQLite holds on it."""


@dataclass
class FileLock:
    """The locks of one server on one database file (see ``lock``)."""

    lock_fd: int
    db_fd: int
    inode: tuple[int, int]


def lock(path: pathlib.Path) -> FileLock:
    """Hold the database file itself (an OS lock, released when the process ends however it ends): two
    servers on one file would each allocate run keys and event ids in memory and file one run's events
    under another's. A symlink or a hard link names the same file, so the lock is on the file (its inode),
    beside ``<resolved path>.lock``, which says which process holds it."""
    real = path.resolve()
    lock_path = real.with_name(real.name + ".lock")
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as err:
        raise UnusableDatabase(f"cannot create the lock file {lock_path}: {err.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise UnusableDatabase(f"{path} is in use by another nissa-server (pid {holder}, lock {lock_path})") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    try:
        return FileLock(fd, *_lock_file(path, real))
    except BaseException:
        os.close(fd)
        raise


def _lock_file(path: pathlib.Path, real: pathlib.Path) -> tuple[int, tuple[int, int]]:
    with contextlib.suppress(FileNotFoundError):
        st = os.stat(real)
        if (st.st_dev, st.st_ino) in _HELD:
            raise UnusableDatabase(f"{path} is in use by another nissa-server (pid {os.getpid()}, the same file "
                                   f"under another name)")
    try:
        db_fd = os.open(real, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as err:
        raise UnusableDatabase(f"cannot open {path}: {err.strerror}") from None
    try:
        fcntl.flock(db_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # flock, not fcntl: SQLite's own locks are fcntl's
    except BlockingIOError:
        os.close(db_fd)
        raise UnusableDatabase(f"{path} is in use by another nissa-server (the same file under another name: "
                               f"a link)") from None
    st = os.fstat(db_fd)
    inode = (st.st_dev, st.st_ino)
    _HELD.add(inode)
    return db_fd, inode


def unlock(held: FileLock) -> None:
    """Release ``lock``'s locks; after the store's connections are closed."""
    _HELD.discard(held.inode)
    os.close(held.db_fd)
    os.close(held.lock_fd)  # closing the last descriptor of the open file releases the flock


def connect_writer(path: pathlib.Path) -> SqliteConn:
    """The one writing connection: creates the file, checks it, and brings the schema up to date.

    Raises ``UnusableDatabase`` for a file that is not a SQLite database, is corrupt, or is newer."""
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, factory=SqliteConn)
    try:
        conn.execute(f"PRAGMA page_size={PAGE_BYTES}")  # only a new, empty file takes it; others keep theirs
        _tune(conn)
        _check(conn, path)
        page = int(conn.execute("PRAGMA page_size").fetchone()[0])
        conn.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_BYTES // page}")
        migrate(conn)
    except sqlite3.DatabaseError as err:
        conn.close()
        raise UnusableDatabase(f"{path} is not a usable SQLite database: {err}") from None
    except UnusableDatabase:
        conn.close()
        raise
    return conn


def _check(conn: sqlite3.Connection, path: pathlib.Path) -> None:
    # quick_check reads every page (not the index contents, as integrity_check would): a damaged
    # file is refused now rather than answering 500 on whichever query first touches the damage.
    try:
        problems = [row[0] for row in conn.execute("PRAGMA quick_check(3)")]
    except sqlite3.DatabaseError as err:  # damage bad enough to stop the check itself
        problems = [str(err)]
    if problems != ["ok"]:
        raise UnusableDatabase(f"{path} is corrupt ({'; '.join(problems)}); restore it or move it aside")


def connect_reader(path: pathlib.Path) -> SqliteConn:
    """A read-only connection for one reader thread; WAL lets it read while the writer commits."""
    # Thread-local in use; closed from the store's thread at shutdown, hence check_same_thread=False.
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None,
                           check_same_thread=False, factory=SqliteConn)
    conn.execute("PRAGMA busy_timeout=10000")
    conn.execute("PRAGMA query_only=ON")
    return conn


def schema_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection) -> int:
    """Apply every migration newer than the file's version, each in its own transaction."""
    current = schema_version(conn)
    if current > SCHEMA_VERSION:
        raise UnusableDatabase(
            f"database schema v{current} is newer than this nissa-server (v{SCHEMA_VERSION}); upgrade the server"
        )
    if current < SCHEMA_VERSION:  # one line, not one per migration
        logger.info("%s", migration_line(current, SCHEMA_VERSION))
    for version in range(current + 1, SCHEMA_VERSION + 1):
        logger.debug("migrating database to schema v%d", version)
        conn.execute("BEGIN IMMEDIATE")
        try:
            MIGRATIONS[version - 1](conn)
            conn.execute(f"PRAGMA user_version={version}")
        except sqlite3.Error:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    return SCHEMA_VERSION

