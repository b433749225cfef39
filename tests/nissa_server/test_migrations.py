"""One migration list for both stores: a database of either store, left at ANY earlier version by an older
server (built from the DDL those servers ran, ``tests/support/old_schemas``), migrates to the current schema,
the same schema a fresh database gets, and keeps its rows."""

import asyncio
import re
import sqlite3

import msgspec
import psycopg
import pytest

from leyline import RunStarted
from nissa_server.store import create_store, migrations, pages, postgres_schema
from nissa_server.store import sqlite_schema as db
from nissa_server.store.postgres import PgConn
from tests.support.databases import new_database
from tests.support.old_schemas import postgresql_at, sqlite_at, steps

sqlite_only = pytest.mark.single_backend
postgresql_only = pytest.mark.postgresql_only

_CONFIG = msgspec.json.encode(RunStarted(name="old", config={"lr": 0.1}, project="p", tags=["a"]))
_EVENTS = [(1, 7, 0, 1, "heartbeat", 0, b'{"seq":1}'), (2, 7, 0, 2, "anomaly_detected", 2, b'{"seq":2}')]


def _old_rows(conn, version: int, mark: str) -> None:
    """What an older server had stored at ``version``: a run with its config, its events, a command."""
    conn.execute(f"INSERT INTO runs (run_key, run_id, created_at, last_seen_at, config) VALUES (7, 'old', 1, 2,"
                 f" {mark})", (_CONFIG,))
    if version < _blocks_version(conn):
        conn.executemany(f"INSERT INTO events VALUES ({', '.join([mark] * 6)}, 0, {mark})", _EVENTS)
    else:
        conn.execute(f"INSERT INTO event_blocks VALUES (1, 7, 0, 1, 1, {mark}), (2, 7, 0, 2, 1, {mark})",
                     (_EVENTS[0][6], _EVENTS[1][6]))
        conn.execute(f"INSERT INTO rare_events VALUES (7, 'anomaly_detected', 2, 0, 2, 2, {mark})", (_EVENTS[1][6],))
    conn.execute("INSERT INTO streams (run_key, rank, last_seq, contiguous) VALUES (7, 0, 2, 2)")
    conn.execute(f"INSERT INTO commands (command_id, run_key, action, status, created_at, updated_at, request,"
                 f" history) VALUES ('c1', 7, 'debug', 'queued', 1, 1, {mark}, {mark})", (b"{}", b"[]"))
    if version >= _counters_version(conn):  # kept up by the server that wrote the rows
        conn.execute("UPDATE counters SET value = CASE name WHEN 'event_id' THEN 2 ELSE 7 END")


def _blocks_version(conn) -> int:
    return 7 if isinstance(conn, sqlite3.Connection) else 4  # each store's own numbering, before the shared list


def _counters_version(conn) -> int:
    return 4 if isinstance(conn, sqlite3.Connection) else 1


def _rows_kept(conn) -> None:
    assert conn.execute("SELECT run_id, created_at, project FROM runs").fetchall() == [("old", 1, "p")]
    assert conn.execute("SELECT key, num FROM run_params").fetchall() == [("lr", 0.1)]  # backfilled at open
    assert [bytes(b) for b in pages.events_page(conn, 7, 0, 10).bodies] == [e[6] for e in _EVENTS]
    assert pages.events_page(conn, 7, 0, 10, kinds=["anomaly_detected"]).bodies == [_EVENTS[1][6]]
    assert conn.execute("SELECT command_id, status FROM commands").fetchall() == [("c1", "queued")]
    assert dict(conn.execute("SELECT name, value FROM counters WHERE name IN ('event_id', 'run_key')")) == {
        "event_id": 2, "run_key": 7}


def _sqlite_schema(conn: sqlite3.Connection) -> set[tuple]:
    return {(kind, name, re.sub(r"\s+", " ", sql).strip()) for kind, name, sql in conn.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL")}


def _open_and_close(target) -> None:
    store = create_store(target)
    store.open()
    asyncio.run(store.close())


@sqlite_only
@pytest.mark.parametrize("version", range(1, len(steps("sqlite")) + 1))
def test_a_sqlite_file_of_any_earlier_version_migrates_and_keeps_its_rows(tmp_path, version):
    _open_and_close(str(tmp_path / "fresh.db"))
    fresh = db.connect_writer(tmp_path / "fresh.db")
    old = sqlite_at(tmp_path / "old.db", version)
    _old_rows(old, version, "?")
    old.close()
    _open_and_close(str(tmp_path / "old.db"))
    conn = db.connect_writer(tmp_path / "old.db")
    assert db.schema_version(conn) == migrations.SCHEMA_VERSION
    assert _sqlite_schema(conn) == _sqlite_schema(fresh)
    _rows_kept(conn)


def _pg_schema(conn: psycopg.Connection) -> set[tuple]:
    columns = conn.execute("SELECT table_name, column_name, data_type, is_nullable, column_default FROM"
                           " information_schema.columns WHERE table_schema = 'public'").fetchall()
    indexes = conn.execute("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'").fetchall()
    statistics = conn.execute("SELECT stxname FROM pg_statistic_ext").fetchall()
    return {("column", *c) for c in columns} | {("index", *i) for i in indexes} | {("statistics", *s)
                                                                                    for s in statistics}


@postgresql_only
def test_a_postgresql_database_of_any_earlier_version_migrates_and_keeps_its_rows():
    fresh_url, url = new_database(blank=True), new_database(blank=True)
    _open_and_close(fresh_url)
    with psycopg.connect(fresh_url, autocommit=True) as fresh:
        expected = _pg_schema(fresh)
    for version in range(1, len(steps("postgresql")) + 1):
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
            postgresql_at(conn, version)
            _old_rows(PgConn(conn), version, "?")
        _open_and_close(url)
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT version, numbering FROM nissa_schema").fetchall() == [
                (migrations.SCHEMA_VERSION, "shared")], version
            assert _pg_schema(conn) == expected, version
            _rows_kept(PgConn(conn))


@postgresql_only
def test_a_postgresql_database_on_the_shared_list_is_read_in_its_numbering():
    url = new_database(blank=True)
    with psycopg.connect(url, autocommit=True) as conn:
        postgresql_at(conn, len(steps("postgresql")))  # an older server's last: what the shared list makes
        last_own = len(steps("postgresql")) + postgres_schema.OWN_NUMBERING_OFFSET  # its place in the shared list
        assert postgres_schema.schema_version(conn) == last_own <= migrations.SCHEMA_VERSION
        assert postgres_schema.migrate(conn) == migrations.SCHEMA_VERSION
        # An older server reads the version alone: the shared numbering's is past every version it knew.
        assert conn.execute("SELECT version FROM nissa_schema").fetchone()[0] > len(steps("postgresql"))

