"""The ranks of a run (torchrun): each rank's state, the run's status made of theirs, and each rank's status
of each command. The same SQL on both backends, run inside the writer's transactions like ``store.sql``.

A rank's row follows its own stream: ``run_started`` opens it (and tells the run its ``world_size``), its
heartbeats and hub health say it is alive (``seen_at``, server time), its ``run_finished`` ends it. A run
of several ranks is ``live`` while its ranks are, ``degraded`` while one is silent and another is not
(the silent ones named in ``status_detail``), and ends once every rank has ended: ``failed`` if one
failed or stopped without finishing (named), else ``interrupted`` or ``finished``.
"""

from __future__ import annotations

import math
import time

import msgspec

from leyline import CommandStatus, CommandStatusChanged, Event, RunFinished, RunStarted, RunStatus, StatusChange
from nissa_server.store.conn import Conn

_enc = msgspec.json.Encoder()
_history = msgspec.json.Decoder(list[StatusChange])

RANKS_SCHEMA = """
ALTER TABLE runs ADD COLUMN world_size INTEGER NOT NULL DEFAULT 1;
ALTER TABLE runs ADD COLUMN status_detail TEXT;
CREATE TABLE ranks (
    run_key {key} NOT NULL,
    rank INTEGER NOT NULL,
    status TEXT NOT NULL DEFAULT 'live',
    started_at {real},
    ended_at {real},
    seen_at {real},
    last_step {key} NOT NULL DEFAULT 0,
    last_epoch {key} NOT NULL DEFAULT 0,
    host TEXT NOT NULL DEFAULT '',
    pid INTEGER NOT NULL DEFAULT 0,
    device TEXT NOT NULL DEFAULT '',
    hub_health {blob},
    PRIMARY KEY (run_key, rank)
){rowid};
CREATE TABLE command_ranks (
    command_id TEXT NOT NULL,
    rank INTEGER NOT NULL,
    run_key {key} NOT NULL,
    status TEXT NOT NULL,
    applied_step {key},
    result {blob},
    message TEXT NOT NULL DEFAULT '',
    updated_at {real} NOT NULL,
    PRIMARY KEY (command_id, rank)
){rowid};
CREATE INDEX command_ranks_run ON command_ranks (run_key)
"""
"""Their step of ``store.migrations`` (``{key}``, ``{real}``, ``{blob}``, ``{rowid}``: see ``migrations.Dialect``)."""

LIVE, SILENT, LOST = "live", "silent", "lost"
"""Rank statuses besides the ended ones (``finished``, ``interrupted``, ``failed``, as ``RunStatus``)."""
_ENDED = tuple(s.value for s in (RunStatus.FINISHED, RunStatus.INTERRUPTED, RunStatus.STOPPED, RunStatus.FAILED))
_STEP_ORDER = {CommandStatus.QUEUED: 0, CommandStatus.DELIVERED: 1, CommandStatus.APPLIED: 2}


def world_size(conn: Conn, run_key: int) -> int:
    row = conn.execute("SELECT world_size FROM runs WHERE run_key = ?", (run_key,)).fetchone()
    return 1 if row is None else int(row[0])


# --- a rank's own events --------------------------------------------------------------------------


def rank_started(conn: Conn, run_key: int, event: Event, p: RunStarted, now: float) -> None:
    """``event``'s rank started (``p``: its payload)."""
    conn.execute(f"UPDATE runs SET world_size = {conn.greatest}(world_size, ?) WHERE run_key = ?",
                 (max(1, min(p.world_size, 65536)), run_key))
    conn.execute(
        "INSERT INTO ranks (run_key, rank, status, started_at, seen_at, last_step, last_epoch, host, pid, device)"
        " VALUES (?,?,?,?,?,?,?,?,?,?) ON CONFLICT (run_key, rank) DO UPDATE SET status = excluded.status,"
        " started_at = excluded.started_at, ended_at = NULL, seen_at = excluded.seen_at, host = excluded.host,"
        " pid = excluded.pid, device = excluded.device",
        (run_key, event.rank, LIVE, event.ts, now, event.step, event.epoch, p.host[:200], p.pid, p.device[:64]))


def rank_seen(conn: Conn, run_key: int, event: Event, now: float, hub_health: bytes | None = None) -> None:
    """A heartbeat (or hub health) of a rank: alive now, at this step; a silent rank is live again."""
    g = conn.greatest
    health = ", hub_health = excluded.hub_health" if hub_health is not None else ""
    conn.execute(
        "INSERT INTO ranks (run_key, rank, status, seen_at, last_step, last_epoch, hub_health) VALUES (?,?,?,?,?,?,?)"
        f" ON CONFLICT (run_key, rank) DO UPDATE SET seen_at = excluded.seen_at,"
        f" last_step = {g}(ranks.last_step, excluded.last_step),"
        f" last_epoch = {g}(ranks.last_epoch, excluded.last_epoch),"
        f" status = CASE WHEN ranks.status = '{SILENT}' THEN '{LIVE}' ELSE ranks.status END{health}",
        (run_key, event.rank, LIVE, now, event.step, event.epoch, hub_health))


def rank_resumed(conn: Conn, run_key: int, event: Event, now: float) -> None:
    """A rank goes on from a checkpoint: live again, whatever it ended as."""
    conn.execute(
        "INSERT INTO ranks (run_key, rank, status, seen_at, last_step, last_epoch) VALUES (?,?,?,?,?,?)"
        " ON CONFLICT (run_key, rank) DO UPDATE SET status = excluded.status, ended_at = NULL,"
        " seen_at = excluded.seen_at",
        (run_key, event.rank, LIVE, now, event.step, event.epoch))


def rank_finished(conn: Conn, run_key: int, event: Event, p: RunFinished, now: float) -> None:
    """``event``'s rank finished (``p``: its payload)."""
    status = RunStatus.after_finish(p.status).value
    g = conn.greatest
    conn.execute(
        "INSERT INTO ranks (run_key, rank, status, ended_at, seen_at, last_step, last_epoch) VALUES (?,?,?,?,?,?,?)"
        " ON CONFLICT (run_key, rank) DO UPDATE SET status = excluded.status, ended_at = excluded.ended_at,"
        f" seen_at = excluded.seen_at, last_step = {g}(ranks.last_step, excluded.last_step),"
        f" last_epoch = {g}(ranks.last_epoch, excluded.last_epoch)",
        (run_key, event.rank, status, event.ts, now, event.step, event.epoch))
    if event.rank == 0:
        conn.execute("UPDATE runs SET finish = ? WHERE run_key = ?", (_enc.encode(p), run_key))
    settle_run(conn, run_key, now, gone_after_s=math.inf)


# --- the run's status from its ranks' -------------------------------------------------------------


def _rank_rows(conn: Conn, run_key: int) -> dict[int, tuple[str, float | None]]:
    return {rank: (status, seen) for rank, status, seen in conn.execute(
        "SELECT rank, status, seen_at FROM ranks WHERE run_key = ? AND rank >= 0", (run_key,))}


def _held(conn: Conn, run_key: int, now: float) -> set[int]:
    return {rank for (rank,) in conn.execute(
        "SELECT rank FROM streams WHERE run_key = ? AND held_until >= ?", (run_key, now))}


def _names(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def settle_run(conn: Conn, run_key: int, now: float, gone_after_s: float) -> str | None:
    """End a running run of several ranks once none runs any more; returns the new status, or None.

    A rank runs until its ``run_finished``, unless it is gone: no connection holds its stream and it was
    not heard from for ``gone_after_s`` (it died without finishing, as a rank killed by SIGKILL does).
    """
    row = conn.execute(f"SELECT status, world_size FROM runs WHERE run_key = ?{conn.for_update}",
                       (run_key,)).fetchone()
    if row is None or row[1] <= 1 or not RunStatus(row[0]).running:
        return None
    ranks = _rank_rows(conn, run_key)
    ended = {r: status for r, (status, _) in ranks.items() if status in _ENDED}
    if not ended:
        return None
    missing = [r for r in range(row[1]) if r not in ended]
    held = _held(conn, run_key, now) if missing else set()
    gone = [r for r in missing if r not in held and (ranks.get(r, (None, None))[1] or 0.0) < now - gone_after_s]
    if len(gone) < len(missing):
        return None  # another rank still runs
    failed = sorted(r for r, status in ended.items() if status == RunStatus.FAILED.value)
    interrupted = sorted(r for r, status in ended.items() if status == RunStatus.INTERRUPTED.value)
    if gone or failed:
        status, detail = RunStatus.FAILED, "; ".join(
            ([f"{_names(gone)} stopped without finishing"] if gone else []) + ([f"{_names(failed)} failed"] if failed
                                                                                 else []))
    elif interrupted:
        status, detail = RunStatus.INTERRUPTED, f"{_names(interrupted)} interrupted"
    elif any(status == RunStatus.STOPPED.value for status in ended.values()):
        status, detail = RunStatus.STOPPED, None
    else:
        status, detail = RunStatus.FINISHED, None
    conn.execute("UPDATE runs SET status = ?, status_detail = ?, ended_at = ? WHERE run_key = ?",
                 (status.value, detail, now, run_key))
    if gone:
        conn.executemany(
            "INSERT INTO ranks (run_key, rank, status) VALUES (?,?,?) ON CONFLICT (run_key, rank) DO UPDATE"
            " SET status = excluded.status", [(run_key, r, LOST) for r in gone])
        _fail_open_commands(conn, run_key, f"{_names(gone)} stopped without finishing the command", now)
    return status.value


def _fail_open_commands(conn: Conn, run_key: int, message: str, now: float) -> None:
    """Commands a gone rank will never finish: failed, the rank named (the others reported their own end)."""
    for command_id, history in conn.execute(
            f"SELECT command_id, history FROM commands WHERE run_key = ? AND status IN ('queued', 'delivered',"
            f" 'applied'){conn.for_update}", (run_key,)).fetchall():
        changes = _history.decode(history)
        changes.append(StatusChange(status=CommandStatus.FAILED, ts=now, message=message))
        conn.execute("UPDATE commands SET status = ?, updated_at = ?, message = ?, history = ? WHERE command_id = ?",
                     (CommandStatus.FAILED.value, now, message, _enc.encode(changes), command_id))


def sweep_ranks(conn: Conn, now: float, silent_after_s: float) -> list[tuple[str, str, str | None]]:
    """Every running run of several ranks: ranks not heard from for ``silent_after_s`` are silent; a run
    with a silent rank and a live one is degraded (and live again once none is silent); a run none of
    whose ranks runs any more ends. Returns (run id, new status, detail) of the runs that changed."""
    changed: list[tuple[str, str, str | None]] = []
    for run_key, run_id, status, detail in conn.execute(
            "SELECT run_key, run_id, status, status_detail FROM runs"
            " WHERE status IN ('live', 'degraded') AND world_size > 1").fetchall():
        conn.execute(f"UPDATE ranks SET status = '{SILENT}' WHERE run_key = ? AND status = '{LIVE}' AND seen_at < ?",
                     (run_key, now - silent_after_s))
        ended = settle_run(conn, run_key, now, silent_after_s)
        if ended is not None:
            changed.append((run_id, ended, None))
            continue
        ranks = _rank_rows(conn, run_key)
        silent = sorted(r for r, (s, _) in ranks.items() if s == SILENT)
        new, text = ((RunStatus.DEGRADED.value, f"{_names(silent)} silent for over {silent_after_s:g} s")
                     if silent and any(s == LIVE for s, _ in ranks.values()) else (RunStatus.LIVE.value, None))
        if (new, text) != (status, detail):
            conn.execute("UPDATE runs SET status = ?, status_detail = ? WHERE run_key = ?", (new, text, run_key))
            changed.append((run_id, new, text))
    return changed


# --- commands: each rank's status, and the command's made of them ----------------------------------


def rank_command_status(conn: Conn, run_key: int, rank: int, change: CommandStatusChanged
                        ) -> tuple[CommandStatus, int | None, bytes | None, str] | None:
    """Record ``rank``'s report of a command; returns the command's status made of every rank's (status,
    applied step, result, message), or None for a run of one rank (its report is the command's).

    A rank's status only moves forward (a delivery reported after the ranks applied it is history). The
    command is failed (or rejected, expired) as soon as one rank's is, named; completed once every rank
    completed; applied once one rank applied it; delivered before.
    """
    world = world_size(conn, run_key)
    if world <= 1 or rank < 0:
        return None
    old = conn.execute(f"SELECT status FROM command_ranks WHERE command_id = ? AND rank = ?{conn.for_update}",
                       (change.command_id, rank)).fetchone()
    status = change.status
    if old is None or (not CommandStatus(old[0]).terminal
                       and (status.terminal or _STEP_ORDER[status] > _STEP_ORDER[CommandStatus(old[0])])):
        conn.execute(
            "INSERT INTO command_ranks (command_id, rank, run_key, status, applied_step, result, message, updated_at)"
            " VALUES (?,?,?,?,?,?,?,?) ON CONFLICT (command_id, rank) DO UPDATE SET status = excluded.status,"
            " applied_step = COALESCE(excluded.applied_step, command_ranks.applied_step),"
            " result = COALESCE(excluded.result, command_ranks.result), message = excluded.message,"
            " updated_at = excluded.updated_at",
            (change.command_id, rank, run_key, status.value, change.applied_step,
             None if change.result is None else _enc.encode(change.result), change.message, time.time()))
    return _overall(conn, change.command_id, world)


def _overall(conn: Conn, command_id: str, world: int) -> tuple[CommandStatus, int | None, bytes | None, str]:
    rows = conn.execute("SELECT rank, status, applied_step, result, message FROM command_ranks"
                        " WHERE command_id = ? ORDER BY rank", (command_id,)).fetchall()
    steps = sorted({step for _, _, step, _, _ in rows if step is not None})
    step = steps[0] if steps else None
    apart = f"ranks applied it at different steps ({', '.join(map(str, steps))})" if len(steps) > 1 else ""
    for rank, status, _, result, message in rows:
        if CommandStatus(status) in (CommandStatus.FAILED, CommandStatus.REJECTED, CommandStatus.EXPIRED):
            return CommandStatus(status), step, result, f"rank {rank}: {message}" if message else f"rank {rank}"
    done = [row for row in rows if row[1] == CommandStatus.COMPLETED.value]
    if len(done) >= world:
        return CommandStatus.COMPLETED, step, done[0][3], apart or done[0][4]
    if any(row[1] in (CommandStatus.APPLIED.value, CommandStatus.COMPLETED.value) for row in rows):
        waiting = [r for r in range(world) if r not in {row[0] for row in done}]
        return CommandStatus.APPLIED, step, None, apart or (f"waiting for {_names(waiting)}" if done else "")
    return CommandStatus.DELIVERED, None, None, ""


def command_ranks(conn: Conn, command_id: str) -> list[tuple]:
    """(rank, status, applied step, result, message) of each rank that reported a command, by rank."""
    return conn.execute("SELECT rank, status, applied_step, result, message FROM command_ranks"
                        " WHERE command_id = ? ORDER BY rank", (command_id,)).fetchall()
