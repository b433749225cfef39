"""Read-only queries, each run on a reader thread's own connection; the same text on both backends."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import takewhile

import msgspec

from leyline import (
    Command,
    CommandAction,
    CommandRecord,
    CommandStatus,
    EscalateRequest,
    HubHealth,
    RankCommandStatus,
    RunFinished,
    RunStarted,
    StatusChange,
)
from leyline.commands import from_flat, is_trainer_command
from leyline.panels import client_panels
from leyline.payloads import Scalar
from leyline.runs import RankInfo, RunDetail
from nissa_server.store import ranks_sql, runs_page, summaries_sql
from nissa_server.store.blocks import Block, from_row
from nissa_server.store.conn import Conn
from nissa_server.store.sql import INDEXED_KIND_SET

_started = msgspec.json.Decoder(RunStarted)
_finished = msgspec.json.Decoder(RunFinished)
_health = msgspec.json.Decoder(HubHealth)
_history = msgspec.json.Decoder(list[StatusChange])
_result = msgspec.json.Decoder(dict[str, Scalar])
_request = msgspec.json.Decoder(EscalateRequest)
_flat_request = msgspec.json.Decoder(dict[str, Scalar | dict[str, Scalar]])  # a call's "args" is the one mapping

MAX_RANK = 65535
BLOCK_PAGE = 64
"""Blocks read per query when walking a stream or an id range, at most."""
FETCH_BYTES = 8 * 1024 * 1024
"""Bytes of blocks one such query aims to read at most: a block is up to a frame (4 MiB), so the first
query reads a few, and the next ones as many as the largest block seen so far says fit."""
FIRST_FETCH = 4
REPLAY_BYTES = 8 * 1024 * 1024
"""Bytes of events in one page of a watcher's replay at most (beyond its first block)."""


def _next_fetch(rows: list[tuple], body: int) -> int:
    """Blocks to ask for next, given the rows just read (``body``: the index of their body column)."""
    largest = max((len(row[body]) for row in rows), default=1)
    return max(1, min(BLOCK_PAGE, FETCH_BYTES // max(1, largest)))

MAX_METRICS = 10_000
"""Series summaries one run's reply holds at most (the first by key; ``metrics_truncated`` says there were more:
``GET /runs/{run_id}/series`` lists every series a page at a time, ``GET /runs?metrics=…`` gives named ones)."""


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


def _run_detail(conn: Conn, row: tuple, now: float, here: str) -> RunDetail:
    """A ``runs`` row (``runs_page.COLUMNS``, then ``hub_health``) as ``GET /runs/{run_id}`` shows it: its
    summary, whole, and what only its own page needs. Sessions of this server are known better from memory
    (see ``routes.runs``); another's by its hold."""
    key, config, finish, health = row[0], row[10], row[11], row[-1]
    details = runs_page.PageDetails(conn, [key], now, here)
    metrics = summaries_sql.read(conn, [key], per_run=MAX_METRICS + 1)[key]  # one more: whether there are more
    truncated = len(metrics) > MAX_METRICS
    if truncated:
        metrics.pop(max(metrics))
    fields = runs_page.summary_fields(row[:-1], details, metrics, whole=True)
    start = _started.decode(config) if config else None
    return RunDetail(**fields, finish=_finished.decode(finish) if finish else None,
                     hub_health=_health.decode(health) if health else None,
                     ranks=_ranks(conn, key, fields["last_seq"], details.held[key]),
                     commands=start.commands if start else [], metrics_truncated=truncated,
                     panels=client_panels({kind for kind, n in fields["counts"].items() if n}))


def list_runs(conn: Conn, now: float, here: str) -> list[RunDetail]:
    """Every run, newest first; ``connected`` says whether a server other than ``here`` holds a stream."""
    rows = conn.execute(f"SELECT {runs_page.COLUMNS}, hub_health FROM runs ORDER BY created_at DESC, run_key DESC"
                        ).fetchall()
    return [_run_detail(conn, row, now, here) for row in rows]


def get_run(conn: Conn, run_id: str, now: float, here: str) -> RunDetail | None:
    row = conn.execute(f"SELECT {runs_page.COLUMNS}, hub_health FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    return None if row is None else _run_detail(conn, row, now, here)


def count_runs(conn: Conn) -> int:
    return int(conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0])


def _stream_blocks(conn: Conn, run_key: int, rank: int, first_seq: int) -> Iterator[Block]:
    """A stream's blocks in seq order, from the one that holds ``first_seq`` (blocks of a stream never
    overlap: it is the last to start at or below it, if that one reaches it)."""
    row = conn.execute("SELECT seq FROM event_blocks WHERE run_key = ? AND rank = ? AND seq <= ? ORDER BY seq DESC"
                       " LIMIT 1", (run_key, rank, first_seq)).fetchone()
    start = row[0] if row else first_seq
    fetch = FIRST_FETCH
    while True:
        rows = conn.execute("SELECT id, seq, n, body FROM event_blocks WHERE run_key = ? AND rank = ? AND seq >= ?"
                            " ORDER BY seq LIMIT ?", (run_key, rank, start, fetch)).fetchall()
        for columns in rows:
            yield from_row(columns)
        if len(rows) < fetch:
            return
        start, fetch = rows[-1][1] + 1, _next_fetch(rows, 3)


def stream_events(conn: Conn, run_key: int, rank: int, first_seq: int,
                   kinds: frozenset[str] | None) -> Iterator[tuple[int, bytes]]:
    """(seq, body) of a stream's events from ``first_seq`` on, of ``kinds`` (None: all), in seq order."""
    for block in _stream_blocks(conn, run_key, rank, first_seq):
        if block.last_seq < first_seq:
            continue
        if kinds is None:
            skip = max(0, first_seq - block.seq)
            yield from enumerate(block.events()[skip:], block.seq + skip)
        else:
            yield from ((seq, body) for seq, kind, _, body in block.rows() if seq >= first_seq and kind in kinds)


def bodies(conn: Conn, run_key: int, rank: int, first: int, last: int) -> list[tuple[int, bytes]]:
    """(seq, stored body) of one stream's events with ``first <= seq <= last``."""
    return list(takewhile(lambda item: item[0] <= last, stream_events(conn, run_key, rank, first, None)))


def replay_page(conn: Conn, run_key: int | None, after_id: int, upto_id: int, limit: int,
                kinds: list[str] | None = None, min_severity: int = 0, rank: int | None = None) -> list[Block]:
    """Stored events with ``after_id < id <= upto_id`` in id order, in blocks: a watcher's replay (of one
    rank, or all). They hold ``limit`` events or more (whole blocks), or ``REPLAY_BYTES`` or more, unless
    the range has fewer."""
    if kinds and set(kinds) <= INDEXED_KIND_SET:
        stream, args = _stream_filter(run_key, rank)
        where = f"{stream}id > ? AND id <= ? AND kind IN ({','.join('?' * len(kinds))}) AND severity >= ?"
        return [Block(event_id, seq, 1, bytes(body)) for event_id, seq, body in conn.execute(
            f"SELECT id, seq, body FROM rare_events WHERE {where} ORDER BY id LIMIT ?",
            (*args, after_id, upto_id, *kinds, min_severity, limit))]
    wanted = frozenset(kinds) if kinds else None
    out: list[Block] = []
    count = size = 0
    for block in _id_blocks(conn, run_key, after_id, upto_id, rank):
        part = block.after(after_id)
        if part is None:
            continue
        if wanted is not None or min_severity > 0:
            kept = [Block(part.first_id + i, seq, 1, body) for i, (seq, kind, severity, body) in enumerate(part.rows())
                    if severity >= min_severity and (wanted is None or kind in wanted)]
        else:
            kept = [part]
        out += kept
        count += sum(b.n for b in kept)
        size += sum(len(b.body) for b in kept)
        if count >= limit or size >= REPLAY_BYTES:
            break
    return out


def _stream_filter(run_key: int | None, rank: int | None) -> tuple[str, tuple[int, ...]]:
    """``"run_key = ? AND rank = ? AND "`` (each part only when given) and its arguments."""
    given = [(column, value) for column, value in (("run_key", run_key), ("rank", rank)) if value is not None]
    return "".join(f"{column} = ? AND " for column, _ in given), tuple(value for _, value in given)


def _id_blocks(conn: Conn, run_key: int | None, after_id: int, upto_id: int,
               rank: int | None = None) -> Iterator[Block]:
    """Blocks (of one run, or all; of one rank, or all) in id order from the one that holds ``after_id + 1``
    to ``upto_id``."""
    run, args = _stream_filter(run_key, rank)
    row = conn.execute(f"SELECT MAX(id) FROM event_blocks WHERE {run}id <= ?", (*args, after_id + 1)).fetchone()
    start = row[0] if row and row[0] is not None else after_id + 1
    fetch = FIRST_FETCH
    while True:
        rows = conn.execute(f"SELECT id, seq, n, body FROM event_blocks WHERE {run}id >= ? AND id <= ? ORDER BY id"
                            " LIMIT ?", (*args, start, upto_id, fetch)).fetchall()
        for columns in rows:
            yield from_row(columns)
        if len(rows) < fetch:
            return
        start, fetch = rows[-1][0] + 1, _next_fetch(rows, 3)


def seq_to_id(conn: Conn, run_key: int, seq: int, rank: int = 0) -> int:
    """The cursor just after ``seq`` of ``rank``: the id of the highest stored seq not above it."""
    if seq <= 0:
        return 0
    row = conn.execute(
        "SELECT id, seq, n FROM event_blocks WHERE run_key = ? AND rank = ? AND seq <= ? ORDER BY seq DESC LIMIT 1",
        (run_key, rank, seq),
    ).fetchone()
    return row[0] + min(seq - row[1], row[2] - 1) if row else 0


_COMMAND_COLUMNS = ("c.command_id, r.run_id, c.action, c.status, c.created_at, c.updated_at, c.request,"
                    " c.applied_step, c.result, c.message, c.history")


def stored_request(data: bytes, run_id: str) -> EscalateRequest | None:
    """The request a command's row keeps, as the server encodes one; a row an earlier version wrote (the
    request flat, every action's fields side by side; or a command the run gave itself kept as its action and
    reason) read as the request it was. None where the row does not say enough to make one (such a command's
    debug or profile window: its length was never sent)."""
    try:
        return _request.decode(data)
    except msgspec.ValidationError:
        pass
    try:
        return from_flat({"run_id": run_id, **_flat_request.decode(data)})
    except msgspec.ValidationError:
        return None


def _record(row: tuple) -> CommandRecord:
    """The command as stored: its request, then what became of it."""
    command_id, run_id, action, status, created, updated, request, step, result, message, history = row
    return CommandRecord(command_id=command_id, run_id=run_id, action=CommandAction(action),
                         request=stored_request(bytes(request), run_id), status=CommandStatus(status),
                         created_at=created, updated_at=updated, applied_step=step,
                         result=_result.decode(result) if result else None, message=message,
                         history=_history.decode(history))


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
    records = [_record(row) for row in rows]  # a run's own commands never go down to it
    return [Command(command_id=rec.command_id, request=rec.request, created_at=rec.created_at)
            for rec in records if rec.request is not None and not is_trainer_command(rec.command_id)]


def due_commands(conn: Conn, created_before: float) -> list[tuple[str, str, str]]:
    """(command id, run id, action) of commands still queued that were created before ``created_before``."""
    return [(row[0], row[1], row[2]) for row in conn.execute(
        "SELECT c.command_id, r.run_id, c.action FROM commands c JOIN runs r USING (run_key)"
        " WHERE c.status = 'queued' AND c.created_at < ? ORDER BY c.created_at", (created_before,))]


def unanswered_stacks(conn: Conn, created_before: float) -> list[tuple[str, str, int, list[int]]]:
    """(command id, run id, world size, ranks that completed it) of the ``stacks`` commands still open that
    were created before ``created_before`` (a rank's hub thread answers one at once, or never)."""
    rows = conn.execute(
        "SELECT c.command_id, r.run_id, r.world_size FROM commands c JOIN runs r USING (run_key)"
        " WHERE c.action = 'stacks' AND c.status IN ('queued', 'delivered', 'applied') AND c.created_at < ?"
        " ORDER BY c.created_at", (created_before,)).fetchall()
    return [(command_id, run_id, max(1, world or 1), [rank for (rank,) in conn.execute(
        "SELECT rank FROM command_ranks WHERE command_id = ? AND status = 'completed' ORDER BY rank", (command_id,))])
            for command_id, run_id, world in rows]


def committed_blocks(conn: Conn, after_id: int, upto_id: int, max_events: int) -> list[tuple]:
    """(run_key, run_id, rank, id, seq, n, body) of the blocks with ``after_id < id <= upto_id`` in id order,
    until they hold ``max_events`` events (fewer only when the range has no more)."""
    out: list[tuple] = []
    events = 0
    while events < max_events:
        rows = conn.execute(
            "SELECT b.run_key, r.run_id, b.rank, b.id, b.seq, b.n, b.body"
            " FROM event_blocks b JOIN runs r ON r.run_key = b.run_key"
            " WHERE b.id > ? AND b.id <= ? ORDER BY b.id LIMIT ?", (after_id, upto_id, BLOCK_PAGE),
        ).fetchall()
        for row in rows:
            out.append(row)
            events += row[5]
            if events >= max_events:
                break
        if len(rows) < BLOCK_PAGE:
            break
        after_id = rows[-1][3]
    return out


def commands_by_status(conn: Conn) -> dict[str, int]:
    return dict(conn.execute("SELECT status, COUNT(*) FROM commands GROUP BY status"))


def runs_by_status(conn: Conn) -> dict[str, int]:
    return dict(conn.execute("SELECT status, COUNT(*) FROM runs GROUP BY status"))


def ranks_by_status(conn: Conn) -> dict[str, int]:
    """Trainer ranks only (the server's own stream is no rank)."""
    return dict(conn.execute("SELECT status, COUNT(*) FROM ranks WHERE rank >= 0 GROUP BY status"))


def list_artifacts(conn: Conn, run_key: int) -> list[tuple[str, int, str, float]]:
    return conn.execute(
        "SELECT name, size, sha256, created_at FROM artifacts WHERE run_key = ? ORDER BY name", (run_key,)
    ).fetchall()
