"""SQL that keeps history from growing forever: delete a run, thin an old run's metric events.
Each function runs inside one writer transaction and refuses a live run there, where its status
cannot change under it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from leyline import RunStatus
from nissa_server.store.conn import Conn

DELETE_CHUNK = 5000
"""Events deleted per transaction when thinning: each transaction stays short, so ingest barely waits."""


@dataclass(frozen=True)
class Removed:
    """What one transaction removed from a run."""

    events: int
    commands: int
    artifacts: list[str]
    stored_bytes: int


def run_status(conn: Conn, run_key: int) -> RunStatus | None:
    row = conn.execute(f"SELECT status FROM runs WHERE run_key = ?{conn.for_update}", (run_key,)).fetchone()
    return None if row is None else RunStatus(row[0])


def delete_run(conn: Conn, run_key: int) -> Removed | RunStatus | None:
    """Delete every row of a run that is not live; its status if it is live, None if it is gone."""
    status = run_status(conn, run_key)
    if status is None or status.running:
        return status
    stored = int(conn.execute("SELECT COALESCE(SUM(bytes), 0) FROM streams WHERE run_key = ?",
                              (run_key,)).fetchone()[0])
    artifacts = conn.execute("SELECT name, size FROM artifacts WHERE run_key = ?", (run_key,)).fetchall()
    events = conn.execute("DELETE FROM events WHERE run_key = ?", (run_key,)).rowcount
    commands = conn.execute("DELETE FROM commands WHERE run_key = ?", (run_key,)).rowcount
    for table in ("artifacts", "kind_counts", "streams", "ranks", "command_ranks", "runs"):
        conn.execute(f"DELETE FROM {table} WHERE run_key = ?", (run_key,))
    return Removed(events=events, commands=commands, artifacts=[name for name, _ in artifacts],
                   stored_bytes=stored + sum(size for _, size in artifacts))


def old_runs(conn: Conn, seen_before: float) -> list[tuple[int, str, str]]:
    """(run key, run id, status) of runs last seen before ``seen_before``, oldest first."""
    return [(row[0], row[1], row[2]) for row in conn.execute(
        "SELECT run_key, run_id, status FROM runs WHERE last_seen_at < ? ORDER BY last_seen_at", (seen_before,))]


def thin_run(conn: Conn, run_key: int, kinds: list[str], limit: int = DELETE_CHUNK) -> Removed | RunStatus | None:
    """Delete up to ``limit`` events of ``kinds`` from a run that is not live, keeping its counts per kind
    and bytes per stream true; ``Removed.events < limit`` means none are left."""
    status = run_status(conn, run_key)
    if status is None or status.running:
        return status
    marks = ",".join("?" * len(kinds))
    gone = conn.execute(
        f"DELETE FROM events WHERE id IN (SELECT id FROM events WHERE run_key = ? AND kind IN ({marks}) LIMIT ?)"
        " RETURNING rank, kind, length(body)", (run_key, *kinds, limit),
    ).fetchall()
    per_kind: Counter[str] = Counter()
    per_rank: Counter[int] = Counter()
    for rank, kind, size in gone:
        per_kind[kind] += 1
        per_rank[rank] += size
    conn.executemany("UPDATE kind_counts SET n = n - ? WHERE run_key = ? AND kind = ?",
                     [(n, run_key, kind) for kind, n in per_kind.items()])
    conn.execute("DELETE FROM kind_counts WHERE run_key = ? AND n <= 0", (run_key,))
    conn.executemany("UPDATE streams SET bytes = bytes - ? WHERE run_key = ? AND rank = ?",
                     [(size, run_key, rank) for rank, size in per_rank.items()])
    return Removed(events=len(gone), commands=0, artifacts=[], stored_bytes=sum(per_rank.values()))
