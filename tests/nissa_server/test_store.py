"""The databases: the SQLite file (schema version and migrations, WAL, indexes, one server per file,
readers that do not block the writer) and the PostgreSQL schema (migrations, one at a time)."""

import asyncio
import os
import sqlite3
import subprocess
import sys
import threading

import httpx
import psycopg
import pytest

from nissa_server.settings import Settings
from nissa_server.store import UnusableDatabase, create_store, pages, postgres_schema, queries
from nissa_server.store import sqlite_schema as db
from nissa_server.store.postgres import PgConn
from nissa_server.store.sqlite import SqliteStore
from tests.support import events_for, ingest_events, running_server
from tests.support.damage import corrupt_database
from tests.support.databases import database_for, new_database, side_connection
from tests.support.old_schemas import postgresql_at, sqlite_at

sqlite_only = pytest.mark.single_backend
postgresql_only = pytest.mark.postgresql_only


@sqlite_only
def test_fresh_database_is_at_the_current_version_in_wal_mode(tmp_path):
    conn = db.connect_writer(tmp_path / "n.db")
    assert db.schema_version(conn) == db.SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA page_size").fetchone()[0] == db.PAGE_BYTES
    assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == db.WAL_CHECKPOINT_BYTES // db.PAGE_BYTES
    indexes = {row[1]: row[2] for row in conn.execute("SELECT type, name, tbl_name FROM sqlite_master "
                                                        "WHERE type = 'index' AND sql IS NOT NULL")}
    assert {"event_blocks_stream", "event_blocks_run"} <= set(indexes)
    assert not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'events'").fetchall()
    columns = [r[2] for r in conn.execute("PRAGMA index_info(event_blocks_stream)")]
    assert columns == ["run_key", "rank", "seq"]


@sqlite_only
def test_old_database_is_migrated_and_keeps_its_rows(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite_at(path, 1)  # a v1 file, as the first release wrote it
    conn.execute("INSERT INTO runs (run_key, run_id, created_at, last_seen_at) VALUES (1, 'old', 0, 0)")
    conn.close()
    conn = db.connect_writer(path)
    assert db.schema_version(conn) == db.SCHEMA_VERSION
    assert conn.execute("SELECT run_id FROM runs").fetchall() == [("old",)]
    assert conn.execute("PRAGMA page_size").fetchone()[0] == 4096  # an existing file keeps its pages
    assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == db.WAL_CHECKPOINT_BYTES // 4096
    assert conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'event_blocks_run'").fetchone()
    assert conn.execute("SELECT secret_hash FROM runs").fetchall() == [(None,)]  # stored before secrets


@sqlite_only
def test_newer_database_is_refused(tmp_path):
    path = tmp_path / "new.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version={db.SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(db.UnusableDatabase, match="newer"):
        db.connect_writer(path)


@sqlite_only
def test_one_store_per_file_while_it_is_open(tmp_path):
    first, second = SqliteStore(tmp_path / "n.db"), SqliteStore(tmp_path / "n.db")
    first.open()
    with pytest.raises(db.UnusableDatabase, match=rf"in use by another nissa-server \(pid {os.getpid()}"):
        second.open()
    asyncio.run(first.close())
    second.open()  # released with the store
    asyncio.run(second.close())


@sqlite_only
def test_a_second_server_on_the_same_file_does_not_start(tmp_path):
    with running_server(tmp_path) as url:
        with pytest.raises(RuntimeError, match="failed to start"), running_server(tmp_path):
            pass
        assert httpx.get(f"{url}/healthz", timeout=30).status_code == 200


@sqlite_only
def test_a_damaged_file_is_refused_before_serving(tmp_path):
    corrupt_database(tmp_path / "n.db")
    with pytest.raises(db.UnusableDatabase, match="is corrupt"):
        SqliteStore(tmp_path / "n.db").open()
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(db.UnusableDatabase, match="is a directory"):
        SqliteStore(tmp_path / "dir.db").open()
    (tmp_path / "text.db").write_text("not a database, but long enough to look like one " * 40)
    with pytest.raises(db.UnusableDatabase, match="not a usable SQLite database"):
        SqliteStore(tmp_path / "text.db").open()


def test_unique_run_rank_seq(tmp_path):
    settings = Settings(**database_for(tmp_path))
    store = create_store(settings.database)
    store.open()
    asyncio.run(store.close())
    conn = side_connection(settings)
    row = (1, 1, 0, 1, 1, b"{}")  # id, run_key, rank, seq, n, body
    conn.execute("INSERT INTO event_blocks (id, run_key, rank, seq, n, body) VALUES (?,?,?,?,?,?)", row)
    with pytest.raises((sqlite3.IntegrityError, psycopg.errors.UniqueViolation)):
        conn.execute("INSERT INTO event_blocks (id, run_key, rank, seq, n, body) VALUES (?,?,?,?,?,?)", (2, *row[1:]))
    conn.close()


@sqlite_only
async def test_an_open_read_transaction_does_not_block_ingest(tmp_path):
    with running_server(tmp_path) as url:
        await ingest_events(url, events_for("rd", 10))
        reader = db.connect_reader(url.settings.db_path)
        reader.execute("BEGIN")
        assert reader.execute("SELECT SUM(n) FROM event_blocks").fetchone()[0] == 10  # snapshot held open
        await ingest_events(url, events_for("rd", 500, start_seq=11))
        assert reader.execute("SELECT SUM(n) FROM event_blocks").fetchone()[0] == 10
        reader.execute("COMMIT")
        assert reader.execute("SELECT SUM(n) FROM event_blocks").fetchone()[0] == 510
        reader.close()


@sqlite_only
def test_default_database_lives_in_the_user_data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    settings = Settings()
    assert str(settings.db_path).startswith(str(tmp_path)) and settings.db_path.name == "nissa.db"
    assert settings.artifacts_root == settings.db_path.with_name("nissa.db.artifacts")



@sqlite_only
def test_the_counters_start_past_what_an_old_file_holds(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite_at(path, 3)
    conn.execute("INSERT INTO runs (run_key, run_id, created_at, last_seen_at) VALUES (7, 'old', 0, 0)")
    conn.execute("INSERT INTO streams VALUES (7, 0, 2, 2)")
    conn.executemany("INSERT INTO events VALUES (?, 7, 0, ?, 'heartbeat', 10, 0, ?)", [(40, 1, b"abc"), (41, 2, b"de")])
    conn.close()
    conn = db.connect_writer(path)
    assert dict(conn.execute("SELECT name, value FROM counters")) == {"event_id": 41, "run_key": 7}
    assert conn.execute("SELECT bytes, session FROM streams").fetchall() == [(5, None)]


@postgresql_only
def test_a_fresh_postgresql_database_is_at_the_current_version():
    url = new_database(blank=True)
    with psycopg.connect(url) as conn:
        assert postgres_schema.migrate(conn) == postgres_schema.SCHEMA_VERSION
        assert postgres_schema.schema_version(conn) == postgres_schema.SCHEMA_VERSION
        indexes = {row[0] for row in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'event_blocks'")}
        assert {"event_blocks_stream", "event_blocks_run"} <= indexes
        assert postgres_schema.migrate(conn) == postgres_schema.SCHEMA_VERSION  # a second time: nothing to do


def _plan(conn: psycopg.Connection, query: str) -> str:
    """The plan of ``query`` where only an index may answer it (no table scan, no bitmap of heap pages)."""
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        conn.execute("SET LOCAL enable_bitmapscan = off")
        return "\n".join(row[0] for row in conn.execute("EXPLAIN " + query))  # type: ignore[operator]


@postgresql_only
def test_postgresql_answers_the_runs_page_filters_from_indexes_alone():
    url = new_database(blank=True)  # a pooled one may hold the current schema: this test builds the one before
    with psycopg.connect(url, autocommit=True) as conn:
        postgresql_at(conn, 7)  # a database of the schema before
        conn.execute("INSERT INTO runs (run_key, run_id, created_at, last_seen_at, project)"
                     " VALUES (7, 'old', 0, 0, 'p')")
        conn.execute("INSERT INTO run_params (run_key, key, num, text) VALUES (7, 'lr', 0.1, NULL)")
        conn.execute("INSERT INTO run_metrics (run_key, key, name, direction, count, best) VALUES"
                     " (7, 'val_loss{rank=0}', 'val_loss', 'min', 3, 0.25)")
        assert postgres_schema.migrate(conn) == postgres_schema.SCHEMA_VERSION
        # What a filter, a sort or a page's summaries read of config entries, summaries and runs: the index holds
        # the run key and the figure (as SQLite's do), so a lab's runs are never read a heap row each.
        for query in ("SELECT run_key FROM run_params WHERE key = 'lr' AND num >= 0.01",
                      "SELECT run_key FROM run_params WHERE key = 'opt' AND text = 'adam'",
                      "SELECT run_key, num, text FROM run_params WHERE key = 'lr'",
                      "SELECT run_key, best FROM run_metrics WHERE key = 'val_loss{rank=0}' AND best < 0.5",
                      "SELECT run_key FROM runs WHERE project ILIKE '%p%'",
                      "SELECT run_key FROM runs WHERE run_group = 'g'"):
            assert "Index Only Scan" in _plan(conn, query), query
        assert conn.execute("SELECT run_key, num FROM run_params").fetchall() == [(7, 0.1)]
        assert conn.execute("SELECT run_key, count, best FROM run_metrics").fetchall() == [(7, 3, 0.25)]
        # A config value belongs to its key: 100 runs' amp is true, no other key's value is; the planner knows.
        conn.execute("INSERT INTO run_params (run_key, key, num, text) SELECT r, 'amp', NULL, 'true'"
                     " FROM generate_series(100, 199) r")
        conn.execute("INSERT INTO run_params (run_key, key, num, text) SELECT r, 'k' || k, NULL, 'v' || r"
                     " FROM generate_series(100, 199) r, generate_series(1, 10) k")
        conn.execute("ANALYZE run_params")
        plan = conn.execute("EXPLAIN SELECT run_key FROM run_params WHERE key = 'amp' AND text = 'true'").fetchone()
        assert 80 <= int(plan[0].split(" rows=")[1].split()[0]) <= 120, plan  # type: ignore[index]


@postgresql_only
def test_servers_starting_together_migrate_once():
    url = new_database()
    errors: list[BaseException] = []

    def open_one() -> None:
        store = create_store(url)
        try:
            store.open()
            asyncio.run(store.close())
        except BaseException as err:  # noqa: BLE001 - collected for the assertion
            errors.append(err)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT version FROM nissa_schema").fetchall() == [(postgres_schema.SCHEMA_VERSION,)]


@postgresql_only
def test_a_newer_or_unreachable_postgresql_database_is_refused_in_one_line():
    url = new_database()
    store = create_store(url)
    store.open()
    asyncio.run(store.close())
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE nissa_schema SET version = version + 1")
    with pytest.raises(UnusableDatabase, match="newer than this nissa-server"):
        create_store(url).open()
    with pytest.raises(UnusableDatabase, match=r"^cannot connect to postgresql://nobody:\*\*\*@") as info:
        create_store("postgresql://nobody:secret@127.0.0.1:1/none").open()
    assert "\n" not in str(info.value) and "secret" not in str(info.value)


# Events as an older server stored them, one row each: (id, run_key, rank, seq, kind, severity, body).
# Run 1 has a gap at seq 6 that a later event filled (id 10), and an anomaly among its heartbeats.
_ONE_BY_ONE = [(i, 1, 0, seq, kind, 2 if kind == "anomaly_detected" else 0,
                b'{"seq":%d,"kind":"%s","severity":"%s"}'
                % (seq, kind.encode(), b"warning" if kind[0] == "a" else b"debug"))
               for i, seq, kind in [(1, 1, "heartbeat"), (2, 2, "heartbeat"), (3, 3, "anomaly_detected"),
                                    (4, 4, "heartbeat"), (5, 5, "heartbeat"), (6, 7, "heartbeat"), (7, 8, "heartbeat"),
                                    (10, 6, "heartbeat")]] + [(8, 2, 0, 1, "heartbeat", 0, b'{"seq":1}'),
                                                              (9, 2, 0, 2, "heartbeat", 0, b'{"seq":2}')]


def _old_events_read_back_the_same(conn) -> None:
    assert conn.execute("SELECT id, run_key, seq, n FROM event_blocks ORDER BY id").fetchall() == [
        (1, 1, 1, 5), (6, 1, 7, 2), (8, 2, 1, 2), (10, 1, 6, 1)]
    assert [bytes(b) for b in pages.events_page(conn, 1, 0, 100).bodies] == [
        row[6] for row in sorted(_ONE_BY_ONE[:8], key=lambda row: row[3])]
    assert pages.events_page(conn, 1, 0, 100, kinds=["anomaly_detected"]).bodies == [_ONE_BY_ONE[2][6]]
    replayed = [b.first_id for page in [queries.replay_page(conn, None, 2, 10, 100)] for block in page
                for b in block.singles()]
    assert replayed == list(range(3, 11))
    assert [b.first_id for b in queries.replay_page(conn, 1, 0, 10, 100, min_severity=2)] == [3]
    assert queries.seq_to_id(conn, 1, 6) == 10 and queries.seq_to_id(conn, 1, 8) == 7


@sqlite_only
def test_events_stored_one_by_one_are_regrouped_into_blocks_sqlite(tmp_path):
    path = tmp_path / "v5.db"
    conn = sqlite_at(path, 5)
    conn.executemany("INSERT INTO events VALUES (?,?,?,?,?,?,0,?)", _ONE_BY_ONE)
    conn.execute("INSERT INTO streams (run_key, rank, last_seq, contiguous) VALUES (1, 0, 8, 8), (2, 0, 2, 2)")
    conn.close()
    _old_events_read_back_the_same(db.connect_writer(path))


@postgresql_only
def test_events_stored_one_by_one_are_regrouped_into_blocks_postgresql():
    url = new_database()
    with psycopg.connect(url) as conn:
        conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
        postgresql_at(conn, 2)
        conn.cursor().executemany("INSERT INTO events VALUES (%s,%s,%s,%s,%s,%s,0,%s)", _ONE_BY_ONE)
        conn.execute("INSERT INTO streams (run_key, rank, last_seq, contiguous) VALUES (1, 0, 8, 8), (2, 0, 2, 2)")
        conn.commit()
        postgres_schema.migrate(conn)
        _old_events_read_back_the_same(PgConn(conn))


@sqlite_only
def test_a_symlink_or_a_hard_link_to_a_served_file_is_refused(tmp_path):
    (tmp_path / "other").mkdir()
    first = SqliteStore(tmp_path / "n.db")
    first.open()
    try:
        (tmp_path / "other" / "sym.db").symlink_to(tmp_path / "n.db")
        os.link(tmp_path / "n.db", tmp_path / "other" / "hard.db")
        for name in ("sym.db", "hard.db"):
            with pytest.raises(db.UnusableDatabase, match="in use by another nissa-server"):
                SqliteStore(tmp_path / "other" / name).open()
        # Another process (the case that matters: another server) is refused on the file's own lock.
        done = subprocess.run([sys.executable, "-m", "nissa_server.cli", "--port", "0", "--db",
                               str(tmp_path / "other" / "hard.db")], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and "in use by another nissa-server" in done.stderr, done.stderr
        assert not (tmp_path / "other" / "hard.db-wal").exists()  # it never opened the file
    finally:
        asyncio.run(first.close())
    second = SqliteStore(tmp_path / "other" / "hard.db")
    second.open()  # released with the first store
    asyncio.run(second.close())
