"""SQL that keeps history from growing forever: delete a run, thin an old run's metric events.
Each function runs inside one writer transaction and refuses a live run there, where its status
cannot change under it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from leyline import RunStatus
from nissa_server.store import alerts_sql, histograms_sql, run_meta_sql, series_sql, summaries_sql
from nissa_server.store.blocks import Block, Row, pack
from nissa_server.store.conn import Conn
from nissa_server.store.histograms_sql import HISTOGRAM

DELETED_RUNS_SCHEMA = "CREATE TABLE deleted_runs (run_id TEXT PRIMARY KEY, deleted_at {real} NOT NULL)"
"""Ids of deleted runs: their trainers' streams are refused for good, and nobody can claim the ids again."""

DELETE_CHUNK = 5000
"""Events deleted (and blocks read) per transaction when thinning: each transaction stays short, so ingest
barely waits."""


@dataclass(frozen=True)
class Removed:
    """What one transaction removed from a run."""

    events: int
    commands: int
    artifacts: list[str]
    stored_bytes: int
    next_id: int = 0
    """Thinning: the id to go on after (0: nothing left to look at)."""


def run_status(conn: Conn, run_key: int) -> RunStatus | None:
    row = conn.execute(f"SELECT status FROM runs WHERE run_key = ?{conn.for_update}", (run_key,)).fetchone()
    return None if row is None else RunStatus(row[0])


def deleted_at(conn: Conn, run_id: str) -> float | None:
    """When the run ``run_id`` was deleted; None if it never was."""
    row = conn.execute("SELECT deleted_at FROM deleted_runs WHERE run_id = ?", (run_id,)).fetchone()
    return None if row is None else float(row[0])


def delete_run(conn: Conn, run_key: int, now: float) -> Removed | RunStatus | None:
    """Delete every row of a run that is not live, and remember its id; its status if it is live, None if
    it is gone."""
    status = run_status(conn, run_key)
    if status is None or status.running:
        return status
    stored = int(conn.execute("SELECT COALESCE(SUM(bytes), 0) FROM streams WHERE run_key = ?",
                              (run_key,)).fetchone()[0])
    artifacts = conn.execute("SELECT name, size FROM artifacts WHERE run_key = ?", (run_key,)).fetchall()
    events = int(conn.execute("SELECT COALESCE(SUM(n), 0) FROM event_blocks WHERE run_key = ?",
                              (run_key,)).fetchone()[0])
    conn.execute("DELETE FROM event_blocks WHERE run_key = ?", (run_key,))
    conn.execute("DELETE FROM rare_events WHERE run_key = ?", (run_key,))
    series_sql.delete_run(conn, run_key)
    histograms_sql.delete_run(conn, run_key)
    summaries_sql.delete_run(conn, run_key)
    run_meta_sql.delete_run(conn, run_key)
    run_id = conn.execute("SELECT run_id FROM runs WHERE run_key = ?", (run_key,)).fetchone()[0]
    conn.execute("INSERT INTO deleted_runs (run_id, deleted_at) VALUES (?, ?) ON CONFLICT (run_id) DO NOTHING",
                 (run_id, now))
    commands = conn.execute("DELETE FROM commands WHERE run_key = ?", (run_key,)).rowcount
    alerts_sql.delete_run_alerts(conn, run_key)
    for table in ("artifacts", "kind_counts", "streams", "ranks", "command_ranks", "runs"):
        conn.execute(f"DELETE FROM {table} WHERE run_key = ?", (run_key,))
    return Removed(events=events, commands=commands, artifacts=[name for name, _ in artifacts],
                   stored_bytes=stored + sum(size for _, size in artifacts))


def old_runs(conn: Conn, seen_before: float) -> list[tuple[int, str, str]]:
    """(run key, run id, status) of runs last seen before ``seen_before``, oldest first."""
    return [(row[0], row[1], row[2]) for row in conn.execute(
        "SELECT run_key, run_id, status FROM runs WHERE last_seen_at < ? ORDER BY last_seen_at", (seen_before,))]


def thin_run(conn: Conn, run_key: int, kinds: list[str], limit: int = DELETE_CHUNK,
             after_id: int = 0) -> Removed | RunStatus | None:
    """Delete events of ``kinds`` (metric kinds: never the rare ones) from a run that is not live, keeping
    its counts per kind and bytes per stream true: its blocks from id ``after_id`` on, until about ``limit``
    events are gone or ``limit`` blocks were read. Each block that loses events is replaced by the blocks of
    the events it keeps. ``Removed.next_id`` is where the next call goes on; 0 when the run is done."""
    status = run_status(conn, run_key)
    if status is None or status.running:
        return status
    doomed = frozenset(kinds)
    rows = conn.execute("SELECT id, rank, seq, n, body FROM event_blocks WHERE run_key = ? AND id > ? ORDER BY id"
                        " LIMIT ?", (run_key, after_id, limit)).fetchall()
    per_kind: Counter[str] = Counter()
    per_rank: Counter[int] = Counter()
    kept: list[tuple] = []
    next_id = 0 if len(rows) < limit else rows[-1][0]
    for event_id, rank, seq, n, body in rows:
        events = Block(event_id, seq, n, bytes(body)).rows()
        gone = [row for row in events if row[1] in doomed]
        if gone:
            conn.execute("DELETE FROM event_blocks WHERE id = ?", (event_id,))
            per_kind.update(row[1] for row in gone)
            per_rank[rank] += sum(len(row[3]) for row in gone)
            ids = {row[0]: event_id + i for i, row in enumerate(events)}
            histograms_sql.delete_events(conn, run_key, [ids[row[0]] for row in gone if row[1] == HISTOGRAM])
            kept += [(b.first_id, run_key, rank, b.seq, b.n, b.body)
                     for b in _repack([row for row in events if row[1] not in doomed], ids)]
        if sum(per_kind.values()) >= limit:
            next_id = event_id
            break
    conn.executemany("INSERT INTO event_blocks (id, run_key, rank, seq, n, body) VALUES (?,?,?,?,?,?)", kept)
    conn.executemany("UPDATE kind_counts SET n = n - ? WHERE run_key = ? AND kind = ?",
                     [(n, run_key, kind) for kind, n in per_kind.items()])
    conn.execute("DELETE FROM kind_counts WHERE run_key = ? AND n <= 0", (run_key,))
    conn.executemany("UPDATE streams SET bytes = bytes - ? WHERE run_key = ? AND rank = ?",
                     [(size, run_key, rank) for rank, size in per_rank.items()])
    return Removed(events=sum(per_kind.values()), commands=0, artifacts=[], stored_bytes=sum(per_rank.values()),
                   next_id=next_id)


def _repack(rows: list[Row], ids: dict[int, int]) -> list[Block]:
    """What is left of a block (rows in seq order, ``ids`` their ids by seq), as blocks: the seqs and ids
    left skip together, so each run of consecutive seqs is one."""
    out: list[Block] = []
    start = 0
    for i in range(1, len(rows) + 1):
        if i == len(rows) or rows[i][0] != rows[i - 1][0] + 1:
            out += pack(rows[start:i], ids[rows[start][0]])
            start = i
    return out
