"""Database files damaged on purpose, for the checks nissa-server makes before serving one."""

from __future__ import annotations

import pathlib

from nissa_server.store import sqlite_schema as db


def corrupt_database(path: pathlib.Path) -> None:
    """A nissa database whose first pages (schema, runs) read fine and whose event pages are garbage:
    it opens, and only a check of every page finds the damage."""
    conn = db.connect_writer(path)
    conn.execute("INSERT INTO runs (run_key, run_id, created_at, last_seen_at) VALUES (1, 'r', 0, 0)")
    conn.executemany("INSERT INTO event_blocks (id, run_key, rank, seq, n, body) VALUES (?, 1, 0, ?, 1, ?)",
                     [(seq, seq, b"x" * 300) for seq in range(1, 3001)])
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(path.read_bytes())
    middle = len(data) // db.PAGE_BYTES // 2 * db.PAGE_BYTES
    data[middle:middle + db.PAGE_BYTES] = b"\xa5" * db.PAGE_BYTES
    path.write_bytes(bytes(data))
