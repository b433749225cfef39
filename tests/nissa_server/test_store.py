"""The SQLite file: schema version and migrations, WAL, indexes, and readers that do not block the writer."""

import asyncio
import sqlite3
import time

import pytest

from nissa_server import db
from nissa_server.settings import Settings
from tests.support import events_for, ingest_events, running_server


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


def test_newer_database_is_refused(tmp_path):
    path = tmp_path / "new.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version={db.SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(RuntimeError, match="newer"):
        db.connect_writer(path)


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


async def test_a_backlog_is_committed_in_bounded_transactions(tmp_path):
    # A backlog committed whole would reach every watcher as one burst, bigger than a watcher's room.
    from collections import Counter

    from leyline import encode
    from leyline.codec import decode_frame_wire
    from leyline.frames import EventBatch
    from nissa_server import writes
    from nissa_server.batches import build_write
    from nissa_server.store import Store

    store = Store(tmp_path / "n.db", max_rows_per_commit=1000)
    store.open()
    rows_per_commit: Counter[int] = Counter()
    store.on_publish = lambda write: rows_per_commit.update({store.commits: len(write.rows)})
    store.start()
    run = store.registry.create("backlog", "")
    await store.call(lambda conn: writes.insert_run(conn, run))
    for k in range(10):  # queued without yielding: the writer finds all ten waiting
        batch = decode_frame_wire(encode(EventBatch(events=events_for("backlog", 400, start_seq=1 + 400 * k))))
        write, _ = build_write(run, 0, batch.events, max_event_bytes=1 << 20)
        await store.submit(write)
    await store.call(lambda conn: None)  # settles after every write queued before it
    await store.close()
    assert sum(rows_per_commit.values()) == 4000
    assert len(rows_per_commit) >= 4 and max(rows_per_commit.values()) <= 1000 + 400


async def test_ids_follow_queue_order_even_when_a_write_built_first_is_queued_last(tmp_path):
    # Watchers skip what is at or below the last id they sent: committed ids must only grow.
    from leyline import encode
    from leyline.codec import decode_frame_wire
    from leyline.frames import EventBatch
    from nissa_server import writes
    from nissa_server.batches import build_write
    from nissa_server.store import Store

    store = Store(tmp_path / "n.db", queue_batches=1)
    store.open()
    published: list[tuple[str, int, int]] = []
    store.on_publish = lambda w: published.append((w.run.run_id, w.first_id, w.last_id))
    store.start()
    early, late = store.registry.create("early", ""), store.registry.create("late", "")
    for run in (early, late):
        await store.call(lambda conn, run=run: writes.insert_run(conn, run))

    def write_for(run):
        batch = decode_frame_wire(encode(EventBatch(events=events_for(run.run_id, 3))))
        return build_write(run, 0, batch.events, max_event_bytes=1 << 20)[0]

    async def after_a_slow_call():  # resumes in the same writer step that frees the queue's slot
        await store.call(lambda conn: time.sleep(0.2))
        await store.submit(write_for(late))

    async def built_first():  # built while the queue is full, so it waits with its rows ready
        await asyncio.sleep(0.05)
        await store.submit(write_for(early))

    async def filler():
        await asyncio.sleep(0.02)
        await store.call(lambda conn: None)

    await asyncio.gather(after_a_slow_call(), built_first(), filler())
    await store.call(lambda conn: None)
    await store.close()
    assert len(published) == 2
    ids = [i for _, first, last in published for i in (first, last)]
    assert ids == sorted(ids) and ids[0] == 1, published
