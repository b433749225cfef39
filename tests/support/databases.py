"""The two store backends in tests: a SQLite file per test, or a PostgreSQL database per test on one
PostgreSQL server per test session (``pgserver`` ships its binaries; nothing to install by hand).

``backend(name)`` says which one ``running_server`` (and ``database_for``) use; the server tests run once per
backend (see ``tests/nissa_server/conftest.py``). Databases are kept and emptied for the next test:
dropping one costs a checkpoint (seconds), emptying it a few milliseconds. ``shutdown()`` stops the server and
removes its data directory; the suite calls it when a test process ends (``tests/conftest.py``), since
pgserver's own clean-up at interpreter exit does not run in a process that ends without it.
"""

from __future__ import annotations

import contextlib
import itertools
import pathlib
import tempfile
import threading
import warnings
from collections.abc import Iterator
from typing import Any

BACKENDS = ("sqlite", "postgresql")
_backend = "sqlite"
_lock = threading.Lock()
_server: Any = None
_unavailable: str | None = None
_free: list[str] = []
_taken: dict[pathlib.Path, list[str]] = {}
_names = itertools.count(1)


def postgres_unavailable() -> str | None:
    """Why PostgreSQL cannot be had on this machine (None: it can); starts it on first call."""
    _admin_uri()
    return _unavailable


def _admin_uri() -> str | None:
    global _server, _unavailable
    with _lock:
        if _server is None and _unavailable is None:
            try:
                root = pathlib.Path(tempfile.mkdtemp(prefix="nissa-pg-"))
                with warnings.catch_warnings():  # platformdirs' note that XDG_RUNTIME_DIR is unset
                    warnings.simplefilter("ignore")
                    import pgserver

                    _server = pgserver.get_server(root, cleanup_mode="delete")
                    _server.uri = _server.get_uri()
            except Exception as err:  # noqa: BLE001 - any reason at all means: skip, and say why
                _unavailable = f"PostgreSQL could not be started: {type(err).__name__}: {err}"
        return None if _server is None else _server.uri


def running() -> tuple[int | None, pathlib.Path] | None:
    """The PostgreSQL this process started: its postmaster's pid and its data directory (None: none)."""
    with _lock:
        server = _server
    if server is None:
        return None
    return server.get_pid(), pathlib.Path(server.pgdata)


def shutdown() -> list[str]:
    """Stop the PostgreSQL this process started and remove its data directory; what is still there after
    (a process, a directory) is returned, one line each (empty: nothing is left)."""
    global _server
    started = running()
    with _lock:
        server, _server = _server, None
        _free.clear()
        _taken.clear()
    if server is None or started is None:
        return []
    server.cleanup()
    pid, root = started
    left = [f"PostgreSQL data directory {root}"] if root.exists() else []
    if pid is not None and _alive(pid):
        left.append(f"PostgreSQL postmaster, pid {pid}")
    return left


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE  # an exited child not yet reaped is gone
    except psutil.NoSuchProcess:
        return False


def _with_database(uri: str, name: str) -> str:
    head, _, query = uri.partition("?")
    return f"{head.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")


def _empty(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        tables = [row[0] for row in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'nissa_schema'")]
        if "counters" in tables:
            data = [t for t in tables if t != "counters"]
            conn.execute(f"TRUNCATE {', '.join(data)}; UPDATE counters SET value = 0")  # type: ignore[arg-type]


def new_database(*, blank: bool = False) -> str:
    """A PostgreSQL database with nothing in it (schema as the last test's server left it, or none; ``blank``:
    none, for a test that builds an older schema itself)."""
    admin = _admin_uri()
    if admin is None:
        raise RuntimeError(_unavailable or "PostgreSQL unavailable")
    with _lock:
        url = _free.pop() if _free else None
    if url is None:
        import psycopg

        name = f"nissa_t{next(_names)}"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")  # type: ignore[arg-type]
        return _with_database(admin, name)
    if blank:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    else:
        _empty(url)
    return url


def database_for(tmp_path: pathlib.Path, name: str = "nissa") -> dict[str, Any]:
    """``Settings`` fields for the current backend: the same database for the same ``tmp_path`` and name
    (a test restarting its server finds its data), artifacts under ``tmp_path``."""
    if _backend == "sqlite":
        return {"db_path": tmp_path / f"{name}.db"}
    key = tmp_path / name
    with _lock:
        urls = _taken.get(key)
    if urls is None:
        urls = [new_database()]
        with _lock:
            _taken[key] = urls
    return {"db_url": urls[0], "artifact_dir": tmp_path / f"{name}.artifacts"}


def release(tmp_path: pathlib.Path) -> None:
    """The databases of a finished test go back to the pool."""
    with _lock:
        for key in [k for k in _taken if k.parent == tmp_path]:
            _free.extend(_taken.pop(key))


def current_backend() -> str:
    return _backend


@contextlib.contextmanager
def backend(name: str) -> Iterator[None]:
    """Within the block, servers started without a database of their own use ``name``."""
    global _backend
    before, _backend = _backend, name
    try:
        yield
    finally:
        _backend = before


def side_connection(settings: Any) -> Any:
    """A connection of the test's own to the server's database (``?`` placeholders, autocommit), for
    changes made behind the server's back."""
    if settings.db_url is None:
        import sqlite3

        return sqlite3.connect(settings.db_path, isolation_level=None)
    import psycopg

    return _Side(psycopg.connect(settings.db_url, autocommit=True))


class _Side:
    """A PostgreSQL connection with ``?`` placeholders and ``close``, like ``sqlite3``'s."""

    def __init__(self, raw: Any) -> None:
        from nissa_server.store.postgres import PgConn

        self.raw = raw
        self._conn = PgConn(raw)

    def execute(self, query: str, params: Any = ()) -> Any:
        return self._conn.execute(query, params)

    def commit(self) -> None:
        """Autocommit already."""

    def close(self) -> None:
        self.raw.close()


_REFUSE_PG = """
CREATE OR REPLACE FUNCTION nissa_test_refuse() RETURNS trigger AS $$
BEGIN
    IF NEW.seq <= {seq} AND NEW.seq + NEW.n > {seq} THEN RAISE EXCEPTION '{message}'; END IF;
    RETURN NEW;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER refuse BEFORE INSERT ON event_blocks FOR EACH ROW EXECUTE FUNCTION nissa_test_refuse()
"""


def refuse_seq(settings: Any, seq: int, message: str) -> None:
    """From now on the database refuses to store an event with ``seq``, with ``message`` (a disk fault)."""
    side = side_connection(settings)
    if settings.db_url is None:
        side.execute(f"CREATE TRIGGER refuse BEFORE INSERT ON event_blocks WHEN NEW.seq <= {seq} AND "
                     f"NEW.seq + NEW.n > {seq} "
                     f"BEGIN SELECT RAISE(ABORT, '{message}'); END")
    else:
        side.raw.execute(_REFUSE_PG.format(seq=seq, message=message))
    side.close()


def allow_all(settings: Any) -> None:
    side = side_connection(settings)
    side.execute("DROP TRIGGER refuse" + ("" if settings.db_url is None else " ON event_blocks"))
    side.close()


def _session_server() -> Any:
    _admin_uri()
    if _server is None:
        raise RuntimeError(_unavailable or "PostgreSQL unavailable")
    return _server


def stop_postgres() -> None:
    """Stop the test session's PostgreSQL server in fast mode: every connection is cut, as in a restart or a
    crash of the database (``start_postgres`` brings it back at the same address)."""
    from pgserver._commands import pg_ctl

    server = _session_server()
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user, timeout=60)


def start_postgres() -> None:
    _session_server().ensure_postgres_running()
