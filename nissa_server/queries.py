"""Read-only queries, each run on a reader thread's own connection."""

from __future__ import annotations

import sqlite3

import msgspec

from leyline import CommandRecord, HubHealth, RunFinished, RunStarted, StatusChange
from leyline.payloads import Scalar
from nissa_server.schemas import RunInfo

_started = msgspec.json.Decoder(RunStarted)
_finished = msgspec.json.Decoder(RunFinished)
_health = msgspec.json.Decoder(HubHealth)
_history = msgspec.json.Decoder(list[StatusChange])
_result = msgspec.json.Decoder(dict[str, Scalar])
_request = msgspec.json.Decoder(dict[str, Scalar])

MAX_RANK = 65535

_RUN_COLUMNS = ("run_key, run_id, name, status, created_at, started_at, ended_at, last_seen_at, last_step,"
                " last_epoch, config, finish, hub_health")


def _run_info(conn: sqlite3.Connection, row: tuple) -> RunInfo:
    key, run_id, name, status, created, started, ended, seen, step, epoch, config, finish, health = row
    start = _started.decode(config) if config else None
    last_seq = {str(rank): seq for rank, seq in conn.execute(
        "SELECT rank, last_seq FROM streams WHERE run_key = ? ORDER BY rank", (key,))}
    counts = dict(conn.execute("SELECT kind, n FROM kind_counts WHERE run_key = ? ORDER BY kind", (key,)))
    return RunInfo(
        run_id=run_id, name=name, status=status, connected=False, created_at=created, started_at=started,
        ended_at=ended, last_seen_at=seen, last_step=step, last_epoch=epoch, last_seq=last_seq, counts=counts,
        config=start.config if start else None, host=start.host if start else None,
        device=start.device if start else None, finish=_finished.decode(finish) if finish else None,
        hub_health=_health.decode(health) if health else None,
    )


def list_runs(conn: sqlite3.Connection) -> list[RunInfo]:
    rows = conn.execute(f"SELECT {_RUN_COLUMNS} FROM runs ORDER BY created_at DESC, run_key DESC").fetchall()
    return [_run_info(conn, row) for row in rows]


def get_run(conn: sqlite3.Connection, run_key: int) -> RunInfo | None:
    row = conn.execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_key = ?", (run_key,)).fetchone()
    return None if row is None else _run_info(conn, row)


def events_page(conn: sqlite3.Connection, run_key: int, after_seq: int, limit: int,
                kinds: list[str] | None = None, rank: int | None = None,
                after_rank: int | None = None) -> list[bytes]:
    """Stored events after the cursor in (seq, rank) order, at most ``limit``.

    The cursor is (``after_seq``, ``after_rank``): the events after it have a larger seq, or the same
    seq and a larger rank. Without ``after_rank`` every event with seq ``after_seq`` is behind it.
    """
    if rank is None and not kinds:
        return _merge_ranks(conn, run_key, after_seq, after_rank, limit)
    where, args = ["run_key = ?", "(seq > ? OR (seq = ? AND rank > ?))"], [run_key, after_seq, after_seq,
                                                                             _rank_floor(after_rank)]
    if rank is not None:
        where.append("rank = ?")
        args.append(rank)
    if kinds:
        where.append(f"kind IN ({','.join('?' * len(kinds))})")
        args.extend(kinds)
    sql = f"SELECT body FROM events WHERE {' AND '.join(where)} ORDER BY seq, rank LIMIT ?"
    return [body for (body,) in conn.execute(sql, (*args, limit))]


def _rank_floor(after_rank: int | None) -> int:
    return MAX_RANK if after_rank is None else after_rank


def _merge_ranks(conn: sqlite3.Connection, run_key: int, after_seq: int, after_rank: int | None,
                 limit: int) -> list[bytes]:
    # One index range per rank, merged here: SQLite would otherwise sort the whole run for every page.
    rows: list[tuple[int, int, bytes]] = []
    floor = _rank_floor(after_rank)
    for (rank,) in conn.execute("SELECT rank FROM streams WHERE run_key = ?", (run_key,)).fetchall():
        first = after_seq + 1 if rank <= floor else after_seq  # this rank's events at after_seq are ahead
        rows += conn.execute(
            "SELECT seq, rank, body FROM events WHERE run_key = ? AND rank = ? AND seq >= ? ORDER BY seq LIMIT ?",
            (run_key, rank, first, limit),
        ).fetchall()
    rows.sort(key=lambda row: (row[0], row[1]))
    return [body for _, _, body in rows[:limit]]


def bodies(conn: sqlite3.Connection, run_key: int, rank: int, first: int, last: int) -> list[tuple[int, bytes]]:
    """(seq, stored body) of one stream's events with ``first <= seq <= last``."""
    return conn.execute("SELECT seq, body FROM events WHERE run_key = ? AND rank = ? AND seq BETWEEN ? AND ?",
                        (run_key, rank, first, last)).fetchall()


def replay_page(conn: sqlite3.Connection, run_key: int | None, after_id: int, upto_id: int, limit: int,
                kinds: list[str] | None = None, min_severity: int = 0) -> list[tuple[int, bytes]]:
    """Stored events with ``after_id < id <= upto_id`` in id order: a watcher's replay."""
    where, args = ["id > ?", "id <= ?"], [after_id, upto_id]
    if run_key is not None:
        where.append("run_key = ?")
        args.append(run_key)
    if kinds:
        where.append(f"kind IN ({','.join('?' * len(kinds))})")
        args.extend(kinds)
    if min_severity > 0:
        where.append("severity >= ?")
        args.append(min_severity)
    sql = f"SELECT id, body FROM events WHERE {' AND '.join(where)} ORDER BY id LIMIT ?"
    return conn.execute(sql, (*args, limit)).fetchall()


def seq_to_id(conn: sqlite3.Connection, run_key: int, seq: int, rank: int = 0) -> int:
    """The cursor just after ``seq`` of ``rank``: the id of the highest stored seq not above it."""
    if seq <= 0:
        return 0
    row = conn.execute(
        "SELECT id FROM events WHERE run_key = ? AND rank = ? AND seq <= ? ORDER BY seq DESC LIMIT 1",
        (run_key, rank, seq),
    ).fetchone()
    return row[0] if row else 0


_COMMAND_COLUMNS = ("c.command_id, r.run_id, c.status, c.created_at, c.updated_at, c.request, c.applied_step,"
                    " c.result, c.message, c.history")


def _record(row: tuple) -> CommandRecord:
    command_id, run_id, status, created, updated, request, step, result, message, history = row
    req = _request.decode(request)
    return CommandRecord(
        command_id=command_id, run_id=run_id, action=req["action"], status=status, created_at=created,
        updated_at=updated, epochs=req.get("epochs"), batches=req.get("batches"),
        through_update=bool(req.get("through_update")), target=req.get("target"), reason=req.get("reason"),
        applied_step=step,
        result=_result.decode(result) if result else None, message=message, history=_history.decode(history),
    )


def get_command(conn: sqlite3.Connection, command_id: str) -> CommandRecord | None:
    row = conn.execute(
        f"SELECT {_COMMAND_COLUMNS} FROM commands c JOIN runs r USING (run_key) WHERE c.command_id = ?",
        (command_id,),
    ).fetchone()
    return None if row is None else _record(row)


def list_commands(conn: sqlite3.Connection, run_key: int) -> list[CommandRecord]:
    rows = conn.execute(
        f"SELECT {_COMMAND_COLUMNS} FROM commands c JOIN runs r USING (run_key) WHERE c.run_key = ?"
        " ORDER BY c.created_at, c.command_id",
        (run_key,),
    ).fetchall()
    return [_record(row) for row in rows]


def open_commands(conn: sqlite3.Connection) -> list[CommandRecord]:
    rows = conn.execute(
        f"SELECT {_COMMAND_COLUMNS} FROM commands c JOIN runs r USING (run_key)"
        " WHERE c.status IN ('queued', 'delivered', 'applied') ORDER BY c.created_at",
    ).fetchall()
    return [_record(row) for row in rows]


def idempotency_keys(conn: sqlite3.Connection) -> list[tuple[str, str, bytes]]:
    return conn.execute(
        "SELECT idempotency_key, command_id, request FROM commands WHERE idempotency_key IS NOT NULL"
    ).fetchall()


def commands_by_status(conn: sqlite3.Connection) -> dict[str, int]:
    return dict(conn.execute("SELECT status, COUNT(*) FROM commands GROUP BY status"))


def list_artifacts(conn: sqlite3.Connection, run_key: int) -> list[tuple[str, int, str, float]]:
    return conn.execute(
        "SELECT name, size, sha256, created_at FROM artifacts WHERE run_key = ? ORDER BY name", (run_key,)
    ).fetchall()
