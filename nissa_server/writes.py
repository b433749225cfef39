"""SQL run by the store's writer (inside its transaction) and the loading of state at start-up."""

from __future__ import annotations

import logging
import sqlite3
import time
from typing import TYPE_CHECKING

import msgspec

from leyline import (
    CommandRecord,
    CommandStatus,
    CommandStatusChanged,
    Event,
    EventKind,
    HubHealth,
    RunFinished,
    RunStarted,
    RunStatus,
    StatusChange,
)
from leyline.commands import is_trainer_command
from nissa_server.runs import RunState, Stream

if TYPE_CHECKING:
    from nissa_server.store import EventWrite

logger = logging.getLogger(__name__)
_enc = msgspec.json.Encoder()
_history = msgspec.json.Decoder(list[StatusChange])

_INSERT_EVENTS = "INSERT INTO events (id, run_key, rank, seq, kind, severity, ts, body) VALUES (?,?,?,?,?,?,?,?)"
_UPSERT_STREAM = (
    "INSERT INTO streams (run_key, rank, last_seq, contiguous) VALUES (?,?,?,?) "
    "ON CONFLICT (run_key, rank) DO UPDATE SET last_seq = excluded.last_seq, contiguous = excluded.contiguous"
)
_UPSERT_COUNT = (
    "INSERT INTO kind_counts (run_key, kind, n) VALUES (?,?,?) "
    "ON CONFLICT (run_key, kind) DO UPDATE SET n = n + excluded.n"
)


def insert_run(conn: sqlite3.Connection, run: RunState) -> None:
    now = time.time()
    conn.execute(
        "INSERT OR IGNORE INTO runs (run_key, run_id, name, status, created_at, last_seen_at, secret_hash)"
        " VALUES (?,?,?,?,?,?,?)",
        (run.run_key, run.run_id, run.name, run.status.value, now, now, run.secret_hash),
    )
    # A run stored before stream secrets takes the first one presented (see nissa_server.ingest).
    conn.execute("UPDATE runs SET secret_hash = ? WHERE run_key = ? AND secret_hash IS NULL",
                 (run.secret_hash, run.run_key))


def set_run_status(conn: sqlite3.Connection, run_key: int, status: RunStatus) -> None:
    conn.execute("UPDATE runs SET status = ? WHERE run_key = ?", (status.value, run_key))


def store_events(conn: sqlite3.Connection, write: EventWrite) -> None:
    run = write.run
    conn.executemany(_INSERT_EVENTS, write.id_rows())
    conn.execute(_UPSERT_STREAM, (run.run_key, write.rank, write.last_seq, write.contiguous))
    conn.executemany(_UPSERT_COUNT, [(run.run_key, kind, n) for kind, n in write.kinds.items()])
    for event in write.effects:
        _apply_effect(conn, run.run_key, event)
    if write.touch:
        conn.execute(
            "UPDATE runs SET status = ?, last_seen_at = ?, last_step = ?, last_epoch = ? WHERE run_key = ?",
            (run.status.value, run.last_seen, run.last_step, run.last_epoch, run.run_key),
        )


def _apply_effect(conn: sqlite3.Connection, run_key: int, event: Event) -> None:
    payload = event.payload
    if isinstance(payload, RunStarted):
        conn.execute(
            "UPDATE runs SET name = ?, config = ?, started_at = ? WHERE run_key = ?",
            (payload.name, _enc.encode(payload), event.ts, run_key),
        )
    elif isinstance(payload, RunFinished):
        conn.execute(
            "UPDATE runs SET status = ?, ended_at = ?, finish = ? WHERE run_key = ?",
            (RunStatus.after_finish(payload.status).value, event.ts, _enc.encode(payload), run_key),
        )
    elif isinstance(payload, HubHealth):
        conn.execute("UPDATE runs SET hub_health = ? WHERE run_key = ?", (_enc.encode(payload), run_key))
    elif isinstance(payload, CommandStatusChanged):
        apply_command_status(conn, run_key, payload, ts=event.ts, step=event.step)


# Kinds whose arrival changes a row other than ``events``.
EFFECT_KINDS = frozenset(
    {EventKind.RUN_STARTED, EventKind.RUN_FINISHED, EventKind.HUB_HEALTH, EventKind.COMMAND_STATUS}
)


def insert_command(conn: sqlite3.Connection, run_key: int, record: CommandRecord, request: bytes,
                   idempotency_key: str | None) -> None:
    conn.execute(
        "INSERT INTO commands (command_id, run_key, action, status, created_at, updated_at, request, history,"
        " idempotency_key) VALUES (?,?,?,?,?,?,?,?,?)",
        (record.command_id, run_key, record.action.value, record.status.value, record.created_at,
         record.updated_at, request, _enc.encode(record.history), idempotency_key),
    )


def apply_command_status(conn: sqlite3.Connection, run_key: int, change: CommandStatusChanged, *,
                         ts: float, step: int | None) -> bool:
    """Move a command to a reported status; a command already final stays final (``expired`` excepted:
    it is the server's guess and a late report from the trainer is the truth)."""
    row = conn.execute(
        "SELECT status, history FROM commands WHERE command_id = ? AND run_key = ?", (change.command_id, run_key)
    ).fetchone()
    if row is None:
        if is_trainer_command(change.command_id):
            return _insert_trainer_command(conn, run_key, change, ts=ts, step=step)
        logger.warning("status %s for unknown command %s ignored", change.status.value, change.command_id)
        return False
    current = CommandStatus(row[0])
    history = _history.decode(row[1])
    history.append(StatusChange(status=change.status, ts=ts, step=step, message=change.message))
    if current.terminal and current is not CommandStatus.EXPIRED:
        conn.execute("UPDATE commands SET history = ? WHERE command_id = ?",
                     (_enc.encode(history), change.command_id))
        return False
    conn.execute(
        "UPDATE commands SET status = ?, updated_at = ?, applied_step = COALESCE(?, applied_step),"
        " result = COALESCE(?, result), message = ?, history = ? WHERE command_id = ?",
        (change.status.value, time.time(), change.applied_step,
         None if change.result is None else _enc.encode(change.result), change.message,
         _enc.encode(history), change.command_id),
    )
    return True


def _insert_trainer_command(conn: sqlite3.Connection, run_key: int, change: CommandStatusChanged, *,
                           ts: float, step: int | None) -> bool:
    """A command the trainer gave itself, recorded from its first status so ``GET /commands/{id}`` shows
    it like any other; its first message is the trainer's reason. An id another run already holds stays
    that run's (``OR IGNORE``)."""
    request = {"action": change.action.value, "reason": change.message or None, "origin": "trainer"}
    history = [StatusChange(status=change.status, ts=ts, step=step, message=change.message)]
    inserted = conn.execute(
        "INSERT OR IGNORE INTO commands (command_id, run_key, action, status, created_at, updated_at, request,"
        " applied_step, result, message, history) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        (change.command_id, run_key, change.action.value, change.status.value, ts, time.time(),
         _enc.encode(request), change.applied_step, None if change.result is None else _enc.encode(change.result),
         change.message, _enc.encode(history)),
    ).rowcount
    return inserted == 1


def max_event_id(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT COALESCE(MAX(id), 0) FROM events").fetchone()[0])


def load_runs(conn: sqlite3.Connection) -> list[RunState]:
    """Every run with its per-rank stream state, as the last transaction left them."""
    runs: dict[int, RunState] = {}
    for key, run_id, name, status, last_seen, step, epoch, secret_hash in conn.execute(
        "SELECT run_key, run_id, name, status, last_seen_at, last_step, last_epoch, secret_hash FROM runs"
    ):
        runs[key] = RunState(run_key=key, run_id=run_id, name=name, status=RunStatus(status),
                             last_seen=last_seen, last_step=step, last_epoch=epoch, secret_hash=secret_hash)
    for key, rank in conn.execute("SELECT run_key, rank FROM streams").fetchall():
        if key in runs:
            runs[key].streams[rank] = load_stream(conn, key, rank)
    return list(runs.values())


def load_stream(conn: sqlite3.Connection, run_key: int, rank: int) -> Stream:
    """One (run, rank) as stored: contiguous prefix, highest seq, and the seqs stored past a gap."""
    row = conn.execute("SELECT last_seq, contiguous FROM streams WHERE run_key = ? AND rank = ?",
                       (run_key, rank)).fetchone()
    if row is None:
        return Stream()
    last_seq, contiguous = row
    stream = Stream(contiguous=contiguous, last_seq=last_seq, stored=contiguous)
    if last_seq > contiguous:
        stream.ahead = {seq for (seq,) in conn.execute(
            "SELECT seq FROM events WHERE run_key = ? AND rank = ? AND seq > ?", (run_key, rank, contiguous))}
    return stream


def touch_run(conn: sqlite3.Connection, run: RunState) -> None:
    conn.execute("UPDATE runs SET status = ?, last_seen_at = ? WHERE run_key = ?",
                 (run.status.value, run.last_seen, run.run_key))
