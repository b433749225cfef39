"""The SQLite file: schema version and migrations, WAL, indexes, and readers that do not block the writer."""

import asyncio
import os
import sqlite3

import httpx
import pytest

from nissa_server import db
from nissa_server.settings import Settings
from nissa_server.store import Store
from tests.support import events_for, ingest_events, running_server
from tests.support.damage import corrupt_database


def test_fresh_database_is_at_the_current_version_in_wal_mode(tmp_path):
    conn = db.connect_writer(tmp_path / "n.db")
    assert db.schema_version(conn) == db.SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA page_size").fetchone()[0] == db.PAGE_BYTES
    assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == db.WAL_CHECKPOINT_BYTES // db.PAGE_BYTES
    indexes = {row[1]: row[2] for row in conn.execute("SELECT type, name, tbl_name FROM sqlite_master "
                                                        "WHERE type = 'index' AND sql IS NOT NULL")}
    assert {"events_stream", "events_kind", "events_run"} <= set(indexes)
    columns = [r[2] for r in conn.execute("PRAGMA index_info(events_stream)")]
    assert columns == ["run_key", "rank", "seq"]
    assert [r[2] for r in conn.execute("PRAGMA index_info(events_kind)")] == ["run_key", "kind", "seq"]


def test_old_database_is_migrated_and_keeps_its_rows(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    db.MIGRATIONS[0](conn)  # a v1 file, as the first release wrote it
    conn.execute("PRAGMA user_version=1")
    conn.execute("INSERT INTO runs (run_key, run_id, created_at, last_seen_at) VALUES (1, 'old', 0, 0)")
    conn.close()
    conn = db.connect_writer(path)
    assert db.schema_version(conn) == db.SCHEMA_VERSION
    assert conn.execute("SELECT run_id FROM runs").fetchall() == [("old",)]
    assert conn.execute("PRAGMA page_size").fetchone()[0] == 4096  # an existing file keeps its pages
    assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == db.WAL_CHECKPOINT_BYTES // 4096
    assert conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'events_run'").fetchone()
    assert conn.execute("SELECT secret_hash FROM runs").fetchall() == [(None,)]  # stored before secrets


def test_newer_database_is_refused(tmp_path):
    path = tmp_path / "new.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version={db.SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(db.UnusableDatabase, match="newer"):
        db.connect_writer(path)


def test_one_store_per_file_while_it_is_open(tmp_path):
    first, second = Store(tmp_path / "n.db"), Store(tmp_path / "n.db")
    first.open()
    with pytest.raises(db.UnusableDatabase, match=rf"in use by another nissa-server \(pid {os.getpid()}"):
        second.open()
    asyncio.run(first.close())
    second.open()  # released with the store
    asyncio.run(second.close())


def test_a_second_server_on_the_same_file_does_not_start(tmp_path):
    with running_server(tmp_path) as url:
        with pytest.raises(RuntimeError, match="failed to start"), running_server(tmp_path):
            pass
        assert httpx.get(f"{url}/healthz", timeout=30).status_code == 200


def test_a_damaged_file_is_refused_before_serving(tmp_path):
    corrupt_database(tmp_path / "n.db")
    with pytest.raises(db.UnusableDatabase, match="is corrupt"):
        Store(tmp_path / "n.db").open()
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(db.UnusableDatabase, match="is a directory"):
        Store(tmp_path / "dir.db").open()
    (tmp_path / "text.db").write_text("not a database, but long enough to look like one " * 40)
    with pytest.raises(db.UnusableDatabase, match="not a usable SQLite database"):
        Store(tmp_path / "text.db").open()


def test_unique_run_rank_seq(tmp_path):
    conn = db.connect_writer(tmp_path / "n.db")
    row = (1, 1, 0, 1, "heartbeat", 0, 0.0, b"{}")
    conn.execute("INSERT INTO events VALUES (?,?,?,?,?,?,?,?)", row)
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("INSERT INTO events VALUES (?,?,?,?,?,?,?,?)", (2, *row[1:]))


async def test_an_open_read_transaction_does_not_block_ingest(tmp_path):
    with running_server(tmp_path) as url:
        await ingest_events(url, events_for("rd", 10))
        reader = db.connect_reader(url.settings.db_path)
        reader.execute("BEGIN")
        assert reader.execute("SELECT COUNT(*) FROM events").fetchone()[0] == 10  # snapshot held open
        await ingest_events(url, events_for("rd", 500, start_seq=11))
        assert reader.execute("SELECT COUNT(*) FROM events").fetchone()[0] == 10
        reader.execute("COMMIT")
        assert reader.execute("SELECT COUNT(*) FROM events").fetchone()[0] == 510
        reader.close()


def test_default_database_lives_in_the_user_data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    settings = Settings()
    assert str(settings.db_path).startswith(str(tmp_path)) and settings.db_path.name == "nissa.db"
    assert settings.artifacts_root == settings.db_path.with_name("nissa.db.artifacts")

