"""Read-only queries, each run on a reader thread's own connection; the same text on both backends."""

from __future__ import annotations

import msgspec

from leyline import Command, CommandRecord, HubHealth, RankCommandStatus, RunFinished, RunStarted, StatusChange
from leyline.payloads import Scalar
from nissa_server.schemas import RankInfo, RunInfo
from nissa_server.store import ranks_sql
from nissa_server.store.conn import Conn
from nissa_server.store.sql import INDEXED_KINDS, INDEXED_KINDS_SQL

_started = msgspec.json.Decoder(RunStarted)
_finished = msgspec.json.Decoder(RunFinished)
_health = msgspec.json.Decoder(HubHealth)
_history = msgspec.json.Decoder(list[StatusChange])
_result = msgspec.json.Decoder(dict[str, Scalar])
_request = msgspec.json.Decoder(dict[str, Scalar])

MAX_RANK = 65535

_RUN_COLUMNS = ("run_key, run_id, name, status, created_at, started_at, ended_at, last_seen_at, last_step,"
                " last_epoch, config, finish, hub_health, world_size, status_detail")


def _ranks(conn: Conn, key: int, last_seq: dict[str, int], held: set[int]) -> list[RankInfo]:
    out = []
    for rank, status, started, ended, seen, step, epoch, host, pid, device, health in conn.execute(
            "SELECT rank, status, started_at, ended_at, seen_at, last_step, last_epoch, host, pid, device, hub_health"
            " FROM ranks WHERE run_key = ? ORDER BY rank", (key,)):
        hub = _health.decode(health) if health else None
        out.append(RankInfo(rank=rank, status=status, connected=rank in held, last_step=step, last_epoch=epoch,
                            seen_at=seen, started_at=started, ended_at=ended, last_seq=last_seq.get(str(rank), 0),
                            queue_depth=hub.queue_depth if hub else None,
                            dropped=sum(hub.dropped.values()) if hub else 0, host=host, pid=pid, device=device))
    return out


def _run_info(conn: Conn, row: tuple, now: float, here: str) -> RunInfo:
    key, run_id, name, status, created, started, ended, seen, step, epoch, config, finish, health, world, why = row
    start = _started.decode(config) if config else None
    last_seq, held, stored = {}, False, 0
    held_ranks: set[int] = set()
    for rank, seq, session, until, nbytes in conn.execute(
            "SELECT rank, last_seq, session, held_until, bytes FROM streams WHERE run_key = ? ORDER BY rank", (key,)):
        last_seq[str(rank)] = seq
        stored += nbytes
        # Sessions of this server are known better from memory (see routes.runs); another's by its hold.
        if until is not None and until >= now and session is not None and not session.startswith(here):
            held = True
            held_ranks.add(rank)
    counts = dict(conn.execute("SELECT kind, n FROM kind_counts WHERE run_key = ? ORDER BY kind", (key,)))
    stored += int(conn.execute("SELECT COALESCE(SUM(size), 0) FROM artifacts WHERE run_key = ?", (key,)).fetchone()[0])
    return RunInfo(
        run_id=run_id, name=name, status=status, connected=held, created_at=created, started_at=started,
        ended_at=ended, last_seen_at=seen, last_step=step, last_epoch=epoch, last_seq=last_seq, counts=counts,
        config=start.config if start else None, host=start.host if start else None,
        device=start.device if start else None, finish=_finished.decode(finish) if finish else None,
        hub_health=_health.decode(health) if health else None, stored_bytes=stored, world_size=world,
        status_detail=why, ranks=_ranks(conn, key, last_seq, held_ranks),
    )


def list_runs(conn: Conn, now: float, here: str) -> list[RunInfo]:
    """Every run, newest first; ``connected`` says whether a server other than ``here`` holds a stream."""
    rows = conn.execute(f"SELECT {_RUN_COLUMNS} FROM runs ORDER BY created_at DESC, run_key DESC").fetchall()
    return [_run_info(conn, row, now, here) for row in rows]


def get_run(conn: Conn, run_id: str, now: float, here: str) -> RunInfo | None:
    row = conn.execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    return None if row is None else _run_info(conn, row, now, here)


def count_runs(conn: Conn) -> int:
    return int(conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0])


def events_page(conn: Conn, run_key: int, after_seq: int, limit: int,
                kinds: list[str] | None = None, rank: int | None = None,
                after_rank: int | None = None) -> list[bytes]:
    """Stored events after the cursor in (seq, rank) order, at most ``limit``.

    The cursor is (``after_seq``, ``after_rank``): the events after it have a larger seq, or the same
    seq and a larger rank. Without ``after_rank`` every event with seq ``after_seq`` is behind it.
    """
    if not kinds or not set(kinds) <= set(INDEXED_KINDS):
        ranks = [rank] if rank is not None else [r for (r,) in conn.execute(
            "SELECT rank FROM streams WHERE run_key = ?", (run_key,)).fetchall()]
        return _merge_ranks(conn, run_key, ranks, after_seq, after_rank, limit, kinds)
    # Rare kinds only: the partial index on (run_key, kind, seq) finds them (its condition spelled out).
    where, args = ["run_key = ?", "(seq > ? OR (seq = ? AND rank > ?))", INDEXED_KINDS_SQL,
                   f"kind IN ({','.join('?' * len(kinds))})"], [run_key, after_seq, after_seq,
                                                               _rank_floor(after_rank), *kinds]
    if rank is not None:
        where.append("rank = ?")
        args.append(rank)
    sql = f"SELECT body FROM events WHERE {' AND '.join(where)} ORDER BY seq, rank LIMIT ?"
    return [bytes(body) for (body,) in conn.execute(sql, (*args, limit))]


def _rank_floor(after_rank: int | None) -> int:
    return MAX_RANK if after_rank is None else after_rank


def _merge_ranks(conn: Conn, run_key: int, ranks: list[int], after_seq: int, after_rank: int | None,
                 limit: int, kinds: list[str] | None) -> list[bytes]:
    # One range of the (run_key, rank, seq) index per rank, merged here: the database would otherwise
    # sort the whole run for every page. A kind filter reads on until the page is full.
    rows: list[tuple[int, int, bytes]] = []
    floor = _rank_floor(after_rank)
    kind = f" AND kind IN ({','.join('?' * len(kinds))})" if kinds else ""
    for rank in ranks:
        first = after_seq + 1 if rank <= floor else after_seq  # this rank's events at after_seq are ahead
        rows += conn.execute(
            f"SELECT seq, rank, body FROM events WHERE run_key = ? AND rank = ? AND seq >= ?{kind} ORDER BY seq"
            " LIMIT ?", (run_key, rank, first, *(kinds or ()), limit),
        ).fetchall()
    rows.sort(key=lambda row: (row[0], row[1]))
    return [bytes(body) for _, _, body in rows[:limit]]


def bodies(conn: Conn, run_key: int, rank: int, first: int, last: int) -> list[tuple[int, bytes]]:
    """(seq, stored body) of one stream's events with ``first <= seq <= last``."""
    return conn.execute("SELECT seq, body FROM events WHERE run_key = ? AND rank = ? AND seq BETWEEN ? AND ?",
                        (run_key, rank, first, last)).fetchall()


def replay_page(conn: Conn, run_key: int | None, after_id: int, upto_id: int, limit: int,
                kinds: list[str] | None = None, min_severity: int = 0,
                rank: int | None = None) -> list[tuple[int, bytes]]:
    """Stored events with ``after_id < id <= upto_id`` in id order: a watcher's replay."""
    where, args = ["id > ?", "id <= ?"], [after_id, upto_id]
    if run_key is not None:
        where.append("run_key = ?")
        args.append(run_key)
    if rank is not None:
        where.append("rank = ?")
        args.append(rank)
    if kinds:
        where.append(f"kind IN ({','.join('?' * len(kinds))})")
        args.extend(kinds)
    if min_severity > 0:
        where.append("severity >= ?")
        args.append(min_severity)
    sql = f"SELECT id, body FROM events WHERE {' AND '.join(where)} ORDER BY id LIMIT ?"
    return conn.execute(sql, (*args, limit)).fetchall()


def seq_to_id(conn: Conn, run_key: int, seq: int, rank: int = 0) -> int:
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


def _with_ranks(conn: Conn, record: CommandRecord) -> CommandRecord:
    """The record with each rank's status (a run of several ranks; none for one)."""
    record.ranks = [RankCommandStatus(rank=rank, status=status, applied_step=step, message=message,
                                      result=_result.decode(result) if result else None)
                    for rank, status, step, result, message in ranks_sql.command_ranks(conn, record.command_id)]
    return record


def get_command(conn: Conn, command_id: str) -> CommandRecord | None:
    row = conn.execute(
        f"SELECT {_COMMAND_COLUMNS} FROM commands c JOIN runs r USING (run_key) WHERE c.command_id = ?",
        (command_id,),
    ).fetchone()
    return None if row is None else _with_ranks(conn, _record(row))


def list_commands(conn: Conn, run_key: int) -> list[CommandRecord]:
    rows = conn.execute(
        f"SELECT {_COMMAND_COLUMNS} FROM commands c JOIN runs r USING (run_key) WHERE c.run_key = ?"
        " ORDER BY c.created_at, c.command_id",
        (run_key,),
    ).fetchall()
    return [_with_ranks(conn, _record(row)) for row in rows]


def queued_commands(conn: Conn, run_key: int) -> list[Command]:
    """A run's commands still waiting to go down to its trainer, oldest first."""
    rows = conn.execute(
        f"SELECT {_COMMAND_COLUMNS} FROM commands c JOIN runs r USING (run_key)"
        " WHERE c.run_key = ? AND c.status = 'queued' ORDER BY c.created_at, c.command_id", (run_key,),
    ).fetchall()
    return [_command(_record(row)) for row in rows]


def _command(rec: CommandRecord) -> Command:
    return Command(command_id=rec.command_id, run_id=rec.run_id, action=rec.action, epochs=rec.epochs,
                   batches=rec.batches, through_update=rec.through_update, target=rec.target, reason=rec.reason,
                   created_at=rec.created_at)


def due_commands(conn: Conn, created_before: float) -> list[tuple[str, str, str]]:
    """(command id, run id, action) of commands still queued that were created before ``created_before``."""
    return [(row[0], row[1], row[2]) for row in conn.execute(
        "SELECT c.command_id, r.run_id, c.action FROM commands c JOIN runs r USING (run_key)"
        " WHERE c.status = 'queued' AND c.created_at < ? ORDER BY c.created_at", (created_before,))]


def committed_rows(conn: Conn, after_id: int, upto_id: int, limit: int) -> list[tuple]:
    """(id, run_key, run_id, rank, seq, kind, severity, ts, body) of events ``after_id < id <= upto_id``."""
    return conn.execute(
        "SELECT e.id, e.run_key, r.run_id, e.rank, e.seq, e.kind, e.severity, e.ts, e.body FROM events e"
        " JOIN runs r ON r.run_key = e.run_key WHERE e.id > ? AND e.id <= ? ORDER BY e.id LIMIT ?",
        (after_id, upto_id, limit),
    ).fetchall()


def commands_by_status(conn: Conn) -> dict[str, int]:
    return dict(conn.execute("SELECT status, COUNT(*) FROM commands GROUP BY status"))


def list_artifacts(conn: Conn, run_key: int) -> list[tuple[str, int, str, float]]:
    return conn.execute(
        "SELECT name, size, sha256, created_at FROM artifacts WHERE run_key = ? ORDER BY name", (run_key,)
    ).fetchall()
