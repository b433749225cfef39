"""The index of a run's distributions by name: which ``histogram`` events hold a name, at which step.

A ``histogram`` event holds every distribution one collection took (a model's every layer, hundreds of
512-bin distributions). A read of one name must not decode every such event of the run: the writer files a
row per (event, name) in the transaction that stores the event, and a read picks the steps it returns from
these rows (``ROW_NUMBER`` over a rank's steps: only the chosen rows leave the database), then reads back only
those events, each from its block by id. ``nbytes`` (the event's JSON) lets a read say what it would decode
before it decodes anything.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from leyline import EventKind
from nissa_server.store.blocks import Block, Row
from nissa_server.store.conn import Conn, Executor

HISTOGRAM = EventKind.HISTOGRAM.value
INDEXED = 3
"""The ``series_progress`` row that says ``histogram_index`` holds the names of the events stored before it
existed (``backfill_once``)."""


def schema_sql() -> str:
    """The table, idempotent: beside the versioned schema, created at every start (as the series tables)."""
    return """
        CREATE TABLE IF NOT EXISTS histogram_index (
            run_key BIGINT NOT NULL,
            name TEXT NOT NULL,
            rank INTEGER NOT NULL,
            step BIGINT NOT NULL,
            seq BIGINT NOT NULL,
            event_id BIGINT NOT NULL,
            nbytes INTEGER NOT NULL,
            PRIMARY KEY (run_key, name, rank, step, seq)
        );
    """


class _Named(msgspec.Struct):
    name: str


class _Names(msgspec.Struct):
    histograms: list[_Named]


class _Event(msgspec.Struct):
    step: int = 0
    payload: _Names | None = None


_names = msgspec.json.Decoder(_Event).decode
_INSERT = ("INSERT INTO histogram_index (run_key, name, rank, step, seq, event_id, nbytes) VALUES (?,?,?,?,?,?,?) "
           "ON CONFLICT DO NOTHING")


def index_rows(run_key: int, rank: int, first_id: int, rows: Iterable[Row]) -> list[tuple]:
    """The ``histogram_index`` rows of a write's ``histogram`` events (``rows`` numbered from ``first_id``)."""
    out: list[tuple] = []
    for event_id, (seq, kind, _, body) in enumerate(rows, first_id):
        if kind != HISTOGRAM:
            continue
        event = _names(body)
        if event.payload is not None:
            out.extend({(run_key, d.name, rank, event.step, seq, event_id, len(body)): None
                        for d in event.payload.histograms})
    return out


def insert(conn: Executor, rows: list[tuple]) -> None:
    conn.executemany(_INSERT, rows)


def backfill_once(conn: Conn) -> None:
    """Once per database (at start-up, in a transaction): the names of the ``histogram`` events stored before
    the index existed (only the runs that have any are read)."""
    if conn.execute("SELECT 1 FROM series_progress WHERE id = ?", (INDEXED,)).fetchone() is not None:
        return
    keys = [int(r[0]) for r in conn.execute("SELECT run_key FROM kind_counts WHERE kind = ? AND n > 0", (HISTOGRAM,))]
    for run_key in keys:
        for first_id, rank, seq, n, body in conn.execute(
                "SELECT id, rank, seq, n, body FROM event_blocks WHERE run_key = ? ORDER BY id", (run_key,)).fetchall():
            rows = Block(int(first_id), int(seq), int(n), bytes(body)).rows()
            if any(row[1] == HISTOGRAM for row in rows):
                insert(conn, index_rows(run_key, int(rank), int(first_id), rows))
    conn.execute("INSERT INTO series_progress (id, upto) VALUES (?, 1) ON CONFLICT DO NOTHING", (INDEXED,))


def delete_run(conn: Conn, run_key: int) -> None:
    """Inside the transaction that deletes a run."""
    conn.execute("DELETE FROM histogram_index WHERE run_key = ?", (run_key,))


def delete_events(conn: Conn, run_key: int, event_ids: list[int]) -> None:
    """Inside the transaction that deletes these events of a run (``nissa-server prune``)."""
    for at in range(0, len(event_ids), 500):
        chunk = event_ids[at:at + 500]
        conn.execute(f"DELETE FROM histogram_index WHERE run_key = ? AND event_id IN ({','.join('?' * len(chunk))})",
                     (run_key, *chunk))


def counts(conn: Conn, run_key: int, name: str, rank: int | None) -> dict[int, tuple[int, int]]:
    """Rank → (events holding ``name``, their bytes)."""
    where, params = ("run_key = ? AND name = ?", [run_key, name])
    if rank is not None:
        where, params = where + " AND rank = ?", [*params, rank]
    return {int(r): (int(n), int(b)) for r, n, b in conn.execute(
        f"SELECT rank, COUNT(*), SUM(nbytes) FROM histogram_index WHERE {where} GROUP BY rank ORDER BY rank", params)}


def chosen(conn: Conn, run_key: int, name: str, rank: int, offsets: list[int] | None) -> list[tuple[int, int, int]]:
    """(step, event id, bytes) of a rank's events holding ``name``, in step order: those at ``offsets`` (0-based
    positions in that order; None: all)."""
    inner = ("SELECT step, seq, event_id, nbytes, ROW_NUMBER() OVER (ORDER BY step, seq) - 1 AS i FROM "
             "histogram_index WHERE run_key = ? AND name = ? AND rank = ?")
    params: tuple[object, ...] = (run_key, name, rank)
    if offsets is None:
        query = f"SELECT step, event_id, nbytes FROM ({inner}) t ORDER BY i"
    else:
        query = f"SELECT step, event_id, nbytes FROM ({inner}) t WHERE i IN ({','.join('?' * len(offsets))}) ORDER BY i"
        params = (*params, *offsets)
    return [(int(s), int(e), int(b)) for s, e, b in conn.execute(query, params)]


def blocks_at(conn: Conn, event_ids: list[int]) -> dict[int, Block]:
    """The blocks of one event each among ``event_ids``, by id (events stored with others are not here)."""
    execute = getattr(conn, "execute_binary", conn.execute)  # PostgreSQL: the blob not hex-encoded on the way
    rows = execute(f"SELECT id, seq, n, body FROM event_blocks WHERE id IN ({','.join('?' * len(event_ids))}) "
                   "AND n = 1", event_ids).fetchall()
    return {int(r[0]): Block(int(r[0]), int(r[1]), 1, bytes(r[3])) for r in rows}


def block_of(conn: Conn, event_id: int) -> Block | None:
    """The block that holds the event ``event_id`` (None if it is gone)."""
    execute = getattr(conn, "execute_binary", conn.execute)  # PostgreSQL: the blob not hex-encoded on the way
    row = execute("SELECT id, seq, n, body FROM event_blocks WHERE id <= ? ORDER BY id DESC LIMIT 1",
                  (event_id,)).fetchone()
    if row is None or int(row[0]) + int(row[2]) <= event_id:
        return None
    return Block(int(row[0]), int(row[1]), int(row[2]), bytes(row[3]))
