"""SQL the writer runs inside its transactions, the same text on both backends (``?`` placeholders;
``conn.for_update`` and ``conn.greatest`` carry the two differences)."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass

import msgspec

from leyline import (
    INDEXED_KINDS,
    CommandRecord,
    CommandStatus,
    CommandStatusChanged,
    ConfigUpdated,
    Event,
    EventKind,
    Heartbeat,
    HubHealth,
    RunFinished,
    RunResumed,
    RunStarted,
    RunStatus,
    StatusChange,
)
from leyline.commands import TRAINER_COMMAND_PREFIXES, is_trainer_command
from nissa_server.runs import Stream
from nissa_server.store import ranks_sql, run_meta_sql
from nissa_server.store.conn import Conn, Executor

logger = logging.getLogger(__name__)
_enc = msgspec.json.Encoder()
_history = msgspec.json.Decoder(list[StatusChange])

OPEN_COMMAND_STATUSES = ("queued", "delivered", "applied")
MAX_CHUNK = 256
"""Rows in one statement of many (six values each at most: far below SQLite's limit on parameters)."""

INDEXED_KIND_SET: frozenset[str] = frozenset(kind.value for kind in INDEXED_KINDS)
"""Kinds stored a second time, one row each, in ``rare_events`` (``leyline.kinds``: ``indexed``): rare and asked
for by kind. Metric kinds are the bulk of a run: a query for them reads the run's blocks in order, most of which
it returns anyway."""
INDEXED_KINDS_SQL = "kind IN ({})".format(", ".join(f"'{kind}'" for kind in sorted(INDEXED_KIND_SET)))
"""The condition of the (since regrouped) per-event index of schema v5, spelled from the same table."""


def next_counter(conn: Conn, name: str, n: int = 1) -> int:
    """Advance counter ``name`` by ``n``; returns its new value (keys are never handed out twice)."""
    return int(conn.execute("UPDATE counters SET value = value + ? WHERE name = ? RETURNING value",
                            (n, name)).fetchone()[0])


def read_counter(conn: Conn, name: str) -> int:
    return int(conn.execute(f"SELECT value FROM counters WHERE name = ?{conn.for_update}", (name,)).fetchone()[0])


def set_counter(conn: Conn, name: str, value: int) -> None:
    conn.execute("UPDATE counters SET value = ? WHERE name = ?", (value, name))


# --- runs and their streams ---------------------------------------------------------------------


@dataclass(frozen=True)
class RunRow:
    """What a server keeps of a run in memory: who it is and whose secret streams it."""

    run_key: int
    run_id: str
    name: str
    secret_hash: bytes | None


def find_run(conn: Conn, run_id: str) -> RunRow | None:
    row = conn.execute("SELECT run_key, run_id, name, secret_hash FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    return None if row is None else RunRow(row[0], row[1], row[2], None if row[3] is None else bytes(row[3]))


def claim_run(conn: Conn, run_id: str, name: str, secret_hash: bytes, *, live: bool, now: float) -> RunRow:
    """The run ``run_id``, created if new (``live``: by its trainer; else by an upload, so not live), its
    secret bound if it had none. The caller compares the secret: a run is never changed for a stranger."""
    found = find_run(conn, run_id)
    if found is None:
        key = next_counter(conn, "run_key")
        status = RunStatus.LIVE if live else RunStatus.LOST
        conn.execute(
            "INSERT INTO runs (run_key, run_id, name, status, created_at, last_seen_at, secret_hash)"
            " VALUES (?,?,?,?,?,?,?) ON CONFLICT (run_id) DO NOTHING",
            (key, run_id, name, status.value, now, now, secret_hash),
        )
    elif found.secret_hash is None:  # stored before stream secrets: the first one presented binds it
        logger.warning("run %s was stored without a stream secret; bound to the first one presented", run_id)
        conn.execute("UPDATE runs SET secret_hash = ? WHERE run_key = ? AND secret_hash IS NULL",
                     (secret_hash, found.run_key))
    found = find_run(conn, run_id)
    assert found is not None
    return found


def revive_run(conn: Conn, run_key: int, now: float) -> None:
    """A live trainer is (back) on the run: a run given up as lost is live again."""
    conn.execute("UPDATE runs SET status = CASE WHEN status = 'lost' THEN 'live' ELSE status END,"
                 " last_seen_at = ? WHERE run_key = ?", (now, run_key))


def take_stream(conn: Conn, run_key: int, rank: int, session: str, held_until: float) -> None:
    """Make ``session`` the writer of (run, rank): from now on a write fenced by another session fails.
    On PostgreSQL this waits for a transaction of the previous writer still under way."""
    conn.execute(
        "INSERT INTO streams (run_key, rank, last_seq, contiguous, session, held_until) VALUES (?,?,0,0,?,?)"
        " ON CONFLICT (run_key, rank) DO UPDATE SET session = excluded.session, held_until = excluded.held_until",
        (run_key, rank, session, held_until),
    )


def load_stream(conn: Conn, run_key: int, rank: int) -> Stream:
    """One (run, rank) as stored: contiguous prefix, highest seq, and the seqs stored past a gap."""
    row = conn.execute("SELECT last_seq, contiguous FROM streams WHERE run_key = ? AND rank = ?",
                       (run_key, rank)).fetchone()
    if row is None:
        return Stream()
    last_seq, contiguous = row
    stream = Stream(contiguous=contiguous, last_seq=last_seq, stored=contiguous)
    if last_seq > contiguous:
        stream.ahead = {seq for first, n in conn.execute(
            "SELECT seq, n FROM event_blocks WHERE run_key = ? AND rank = ? AND seq > ?", (run_key, rank, contiguous))
            for seq in range(first, first + n)}
    return stream


def seqs_stored(conn: Conn, run_key: int, rank: int, first: int, last: int) -> bool:
    """Whether any seq of ``first..last`` of the stream is stored (its blocks never overlap: the one that
    starts last at or below ``last`` is the only one that may reach into the range)."""
    row = conn.execute("SELECT seq + n - 1 FROM event_blocks WHERE run_key = ? AND rank = ? AND seq <= ?"
                       " ORDER BY seq DESC LIMIT 1", (run_key, rank, last)).fetchone()
    return row is not None and row[0] >= first


def insert_rare(conn: Executor, rows: list[tuple]) -> None:
    """Events of the indexed kinds: (run_key, kind, seq, rank, id, severity, body)."""
    conn.executemany("INSERT INTO rare_events (run_key, kind, seq, rank, id, severity, body) VALUES (?,?,?,?,?,?,?)",
                     rows)


def stream_holder(conn: Conn, run_key: int, rank: int) -> str | None:
    """The session that took over (run, rank) last: the one whose writes commit."""
    row = conn.execute("SELECT session FROM streams WHERE run_key = ? AND rank = ?", (run_key, rank)).fetchone()
    return None if row is None else row[0]


def release_stream(conn: Conn, run_key: int, rank: int, session: str, now: float) -> None:
    conn.execute("UPDATE streams SET held_until = NULL WHERE run_key = ? AND rank = ? AND session = ?",
                 (run_key, rank, session))
    conn.execute("UPDATE runs SET last_seen_at = ? WHERE run_key = ?", (now, run_key))


def hold_streams(conn: Conn, held: list[tuple[int, int, str]], until: float) -> None:
    """The streams this server has a connection for are still held, until ``until``."""
    conn.executemany("UPDATE streams SET held_until = ? WHERE run_key = ? AND rank = ? AND session = ?",
                     [(until, key, rank, session) for key, rank, session in held])


def mark_lost(conn: Conn, now: float, lost_after_s: float) -> list[str]:
    """Runs live in name whose streams nobody holds and that were silent past the timeout: lost."""
    return [run_id for (run_id,) in conn.execute(
        "UPDATE runs SET status = 'lost' WHERE status IN ('live', 'degraded') AND last_seen_at < ? AND NOT EXISTS"
        " (SELECT 1 FROM streams s WHERE s.run_key = runs.run_key AND s.held_until >= ?) RETURNING run_id",
        (now - lost_after_s, now),
    ).fetchall()]


def _chunks(rows: list[tuple]) -> Iterator[list[tuple]]:
    """``rows`` in chunks whose sizes are powers of two (at most ``MAX_CHUNK``), largest first: statements
    of many rows in a few shapes only, each compiled (or prepared) once and then reused."""
    i = 0
    while i < len(rows):
        size = min(MAX_CHUNK, 1 << ((len(rows) - i).bit_length() - 1))
        yield rows[i:i + size]
        i += size


@functools.lru_cache(maxsize=64)
def _values(columns: int, rows: int) -> str:
    return ",".join(["(" + ",".join("?" * columns) + ")"] * rows)


def update_streams(conn: Conn, rows: list[tuple[int, int, str, int, int, int]]) -> set[tuple[int, int]]:
    """Record what a transaction adds to streams, (run_key, rank, session, last_seq, contiguous, bytes)
    each; returns the (run_key, rank) updated: a stream missing is no longer held by that session (the
    fence). One statement for many streams, not one each."""
    done: set[tuple[int, int]] = set()
    for chunk in _chunks(rows):
        done.update((key, rank) for key, rank in conn.execute(
            f"WITH v(run_key, rank, session, last_seq, contiguous, nbytes) AS (VALUES {_values(6, len(chunk))})"
            " UPDATE streams SET last_seq = v.last_seq, contiguous = v.contiguous, bytes = streams.bytes + v.nbytes"
            " FROM v WHERE streams.run_key = v.run_key AND streams.rank = v.rank AND streams.session = v.session"
            " RETURNING streams.run_key, streams.rank", [value for row in chunk for value in row]))
    return done


def update_stream_unfenced(conn: Conn, run_key: int, rank: int, last_seq: int, contiguous: int, nbytes: int) -> None:
    """Record what a write without a session's fence (an upload, the server's own events) adds to its stream."""
    g = conn.greatest
    conn.execute(
        "INSERT INTO streams (run_key, rank, last_seq, contiguous, bytes) VALUES (?,?,?,?,?)"
        f" ON CONFLICT (run_key, rank) DO UPDATE SET last_seq = {g}(streams.last_seq, excluded.last_seq),"
        f" contiguous = {g}(streams.contiguous, excluded.contiguous), bytes = streams.bytes + excluded.bytes",
        (run_key, rank, last_seq, contiguous, nbytes),
    )


def count_kinds(conn: Conn, rows: list[tuple[int, str, int]]) -> None:
    """Add to the counts per run and kind: (run_key, kind, n) each, a (run_key, kind) once at most."""
    for chunk in _chunks(rows):
        conn.execute(f"INSERT INTO kind_counts (run_key, kind, n) VALUES {_values(3, len(chunk))}"
                     " ON CONFLICT (run_key, kind) DO UPDATE SET n = kind_counts.n + excluded.n",
                     [value for row in chunk for value in row])


def touch_runs(conn: Conn, rows: list[tuple[int, int, int]]) -> set[int]:
    """The runs were seen now, at these steps and epochs: (run_key, step, epoch) each; returns the run keys
    updated (one missing is gone: deleted)."""
    g, now = conn.greatest, time.time()
    done: set[int] = set()
    for chunk in _chunks(rows):
        done.update(key for (key,) in conn.execute(
            f"WITH v(run_key, step, epoch) AS (VALUES {_values(3, len(chunk))}) UPDATE runs SET last_seen_at = ?,"
            f" last_step = {g}(runs.last_step, v.step), last_epoch = {g}(runs.last_epoch, v.epoch) FROM v"
            " WHERE runs.run_key = v.run_key RETURNING runs.run_key", [*(v for row in chunk for v in row), now]))
    return done


def run_progress(conn: Conn, run_key: int) -> tuple[str, int, int] | None:
    """(status, last step, last epoch) of a run, locked against a concurrent change where rows lock."""
    row = conn.execute(f"SELECT status, last_step, last_epoch FROM runs WHERE run_key = ?{conn.for_update}",
                       (run_key,)).fetchone()
    return None if row is None else (row[0], row[1], row[2])


def next_server_seq(conn: Conn, run_key: int, rank: int) -> int:
    row = conn.execute("SELECT last_seq FROM streams WHERE run_key = ? AND rank = ?", (run_key, rank)).fetchone()
    return 1 if row is None else row[0] + 1


# --- effects of stored events -------------------------------------------------------------------

# Kinds whose arrival changes a row other than ``events`` (heartbeats: their rank's, every few seconds).
EFFECT_KINDS = frozenset(
    {EventKind.RUN_STARTED, EventKind.RUN_FINISHED, EventKind.RUN_RESUMED, EventKind.HUB_HEALTH,
     EventKind.COMMAND_STATUS, EventKind.HEARTBEAT, EventKind.CONFIG}
)


def apply_effect(conn: Conn, run_key: int, event: Event) -> None:
    payload, now = event.payload, time.time()
    if isinstance(payload, RunStarted):
        if event.rank == 0:  # every rank sends one; the run's name and config are rank 0's
            conn.execute("UPDATE runs SET name = ?, config = ?, started_at = ? WHERE run_key = ?",
                         (payload.name, _enc.encode(payload), event.ts, run_key))
            run_meta_sql.started(conn, run_key, payload)
        ranks_sql.rank_started(conn, run_key, event, payload, now)
    elif isinstance(payload, RunFinished):
        ranks_sql.rank_finished(conn, run_key, event, payload, now)
        if ranks_sql.world_size(conn, run_key) <= 1:  # alone, it ends the run; several end it when all have
            conn.execute("UPDATE runs SET status = ?, ended_at = ?, finish = ? WHERE run_key = ?",
                         (RunStatus.after_finish(payload.status).value, event.ts, _enc.encode(payload), run_key))
    elif isinstance(payload, RunResumed):  # the same run goes on: live again, its last ending forgotten
        conn.execute("UPDATE runs SET status = ?, status_detail = NULL, ended_at = NULL, finish = NULL,"
                     " last_seen_at = ? WHERE run_key = ?", (RunStatus.LIVE.value, now, run_key))
        ranks_sql.rank_resumed(conn, run_key, event, now)
    elif isinstance(payload, ConfigUpdated):
        if event.rank == 0:  # as run_started's: the run's config is rank 0's
            run_meta_sql.config_updated(conn, run_key, payload)
    elif isinstance(payload, HubHealth):
        health = _enc.encode(payload)
        conn.execute("UPDATE runs SET hub_health = ? WHERE run_key = ?", (health, run_key))
        ranks_sql.rank_seen(conn, run_key, event, now, health)
    elif isinstance(payload, Heartbeat):
        ranks_sql.rank_seen(conn, run_key, event, now)
    elif isinstance(payload, CommandStatusChanged):
        apply_command_status(conn, run_key, payload, ts=event.ts, step=event.step, rank=event.rank)


# --- commands -----------------------------------------------------------------------------------


def insert_command(conn: Conn, run_key: int, record: CommandRecord, request: bytes,
                   idempotency_key: str | None) -> None:
    conn.execute(
        "INSERT INTO commands (command_id, run_key, action, status, created_at, updated_at, request, history,"
        " idempotency_key) VALUES (?,?,?,?,?,?,?,?,?)",
        (record.command_id, run_key, record.action.value, record.status.value, record.created_at,
         record.updated_at, request, _enc.encode(record.history), idempotency_key),
    )


def command_for_key(conn: Conn, idempotency_key: str) -> tuple[str, bytes, str] | None:
    """(command id, request, status) of the command an ``Idempotency-Key`` created."""
    row = conn.execute("SELECT command_id, request, status FROM commands WHERE idempotency_key = ?",
                       (idempotency_key,)).fetchone()
    return None if row is None else (row[0], bytes(row[1]), row[2])


_OPERATOR_COMMAND = " AND ".join("command_id NOT LIKE ?" for _ in TRAINER_COMMAND_PREFIXES)


def open_command_count(conn: Conn, run_key: int) -> int:
    """Commands of the run not over yet that an operator sent (the trainer's own take no place)."""
    return int(conn.execute(
        f"SELECT COUNT(*) FROM commands WHERE run_key = ? AND status IN (?,?,?) AND {_OPERATOR_COMMAND}",
        (run_key, *OPEN_COMMAND_STATUSES, *(prefix + "%" for prefix in TRAINER_COMMAND_PREFIXES)),
    ).fetchone()[0])


def command_status(conn: Conn, command_id: str) -> str | None:
    row = conn.execute(f"SELECT status FROM commands WHERE command_id = ?{conn.for_update}",
                       (command_id,)).fetchone()
    return None if row is None else row[0]


def apply_command_status(conn: Conn, run_key: int, change: CommandStatusChanged, *, ts: float,
                         step: int | None, rank: int = 0) -> bool:
    """Move a command to a reported status; a command already final stays final (``expired`` excepted:
    it is the server's guess and a late report from the trainer is the truth). In a run of several ranks
    the report is ``rank``'s, and the command's status is made of every rank's (``ranks_sql``)."""
    row = conn.execute(
        f"SELECT status, history FROM commands WHERE command_id = ? AND run_key = ?{conn.for_update}",
        (change.command_id, run_key),
    ).fetchone()
    if row is None:
        if not is_trainer_command(change.command_id):
            logger.warning("status %s for unknown command %s ignored", change.status.value, change.command_id)
            return False
        if not _insert_trainer_command(conn, run_key, change, ts=ts, step=step):
            return False
        ranks_sql.rank_command_status(conn, run_key, rank, change)  # its first report: the command's too
        return True
    overall = ranks_sql.rank_command_status(conn, run_key, rank, change)
    current = CommandStatus(row[0])
    history = _history.decode(row[1])
    said = f"rank {rank}: {change.message}" if overall is not None else change.message
    history.append(StatusChange(status=change.status, ts=ts, step=step, message=said.rstrip(": ")))
    if current.terminal and current is not CommandStatus.EXPIRED:
        conn.execute("UPDATE commands SET history = ? WHERE command_id = ?",
                     (_enc.encode(history), change.command_id))
        return False
    status, applied_step, result, message = overall or (
        change.status, change.applied_step, None if change.result is None else _enc.encode(change.result),
        change.message)
    conn.execute(
        "UPDATE commands SET status = ?, updated_at = ?, applied_step = COALESCE(?, applied_step),"
        " result = COALESCE(?, result), message = ?, history = ? WHERE command_id = ?",
        (status.value, time.time(), applied_step, result, message, _enc.encode(history), change.command_id),
    )
    return True


def _insert_trainer_command(conn: Conn, run_key: int, change: CommandStatusChanged, *, ts: float,
                            step: int | None) -> bool:
    """A command the trainer gave itself, recorded from its first status so ``GET /commands/{id}`` shows
    it like any other: its request as that status carries it (a trainer of an earlier version sent only its
    action, and its reason as the first message). An id another run already holds stays
    that run's."""
    request = change.request or {"action": change.action.value, "reason": change.message or None, "origin": "trainer"}
    history = [StatusChange(status=change.status, ts=ts, step=step, message=change.message)]
    inserted = conn.execute(
        "INSERT INTO commands (command_id, run_key, action, status, created_at, updated_at, request,"
        " applied_step, result, message, history) VALUES (?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
        (change.command_id, run_key, change.action.value, change.status.value, ts, time.time(),
         _enc.encode(request), change.applied_step, None if change.result is None else _enc.encode(change.result),
         change.message, _enc.encode(history)),
    ).rowcount
    return inserted == 1


# --- artifacts ----------------------------------------------------------------------------------


def put_artifact(conn: Conn, run_key: int, name: str, size: int, sha256: str, created_at: float) -> None:
    conn.execute(
        "INSERT INTO artifacts (run_key, name, size, sha256, created_at) VALUES (?,?,?,?,?) ON CONFLICT"
        " (run_key, name) DO UPDATE SET size = excluded.size, sha256 = excluded.sha256,"
        " created_at = excluded.created_at",
        (run_key, name, size, sha256, created_at),
    )
