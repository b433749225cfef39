"""The SQLite file: its connections, and the shared migrations (``store.migrations``) run on it. The schema
version lives in ``PRAGMA user_version``."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import pathlib
import sqlite3
from dataclasses import dataclass

from nissa_server.store.migrations import MIGRATIONS, SCHEMA_VERSION, Dialect
from nissa_server.store.model import UnusableDatabase, migration_line

logger = logging.getLogger(__name__)


class SqliteConn(sqlite3.Connection):
    """A connection that tells the shared SQL how SQLite spells what differs (see ``store.conn``)."""

    for_update = ""  # one writer holds the whole file while it writes
    greatest = "MAX"
    snapshot = "BEGIN"  # WAL: the reads that follow see one commit
    ilike = "LIKE"


SQLITE = Dialect("sqlite", key="INTEGER", real="REAL", blob="BLOB", small="INTEGER", rowid=" WITHOUT ROWID",
                 by_id="", rows=lambda conn, query: conn.execute(query))
"""SQLite's spelling of the schema (a cursor reads its rows as they are walked)."""


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
            MIGRATIONS[version - 1].apply(conn, SQLITE)
            conn.execute(f"PRAGMA user_version={version}")
        except sqlite3.Error:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    return SCHEMA_VERSION

