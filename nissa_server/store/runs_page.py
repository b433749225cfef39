"""``GET /runs``: a page of runs, newest first, each as a bounded summary (the full config is on
``GET /runs/{id}``), so that listing many runs with huge configs stays small."""

from __future__ import annotations

import msgspec

from leyline import RunFinished, RunStarted
from leyline.outcome import RunOutcome as Outcome
from leyline.payloads import Scalar
from nissa_server.store.conn import Conn

MAX_PARAMS = 64
"""Config entries a summary carries at most."""
MAX_CHARS = 80
"""Characters of a config key or string value (or host, device) in a summary; longer ones are cut."""

_started = msgspec.json.Decoder(RunStarted)
_finished = msgspec.json.Decoder(RunFinished)


class RunSummary(msgspec.Struct, kw_only=True):
    """A run as ``GET /runs`` lists it."""

    run_id: str
    name: str
    status: str
    connected: bool = False
    created_at: float
    started: float | None
    """When its trainer started it (``started_at``, also given under that name)."""
    ended: float | None
    started_at: float | None
    ended_at: float | None
    last_seen_at: float
    duration_s: float | None
    """From start to end, or to the last time it was seen while it runs."""
    ranks: int
    last_step: int
    last_epoch: int
    last_seq: dict[str, int]
    counts: dict[str, int]
    stored_bytes: int
    status_detail: str | None = None
    host: str | None = None
    device: str | None = None
    summary: Outcome | None
    params: dict[str, Scalar]
    """The config, flattened to ``dotted.key → value`` (at most ``MAX_PARAMS`` entries, cut to ``MAX_CHARS``)."""


def _cut(text: str | None) -> str | None:
    return text if text is None or len(text) <= MAX_CHARS else text[:MAX_CHARS - 1] + "…"


def _params(config: dict[str, Scalar]) -> dict[str, Scalar]:
    out: dict[str, Scalar] = {}
    for key, value in config.items():
        if len(out) >= MAX_PARAMS:
            break
        out[_cut(key) or ""] = _cut(value) if isinstance(value, str) else value
    return out


def _outcome(start: RunStarted | None, finish: RunFinished | None) -> Outcome | None:
    policy = start.config.get("policy") if start else None
    if policy is None and (finish is None or (not finish.rounds and finish.final_accuracy is None)):
        return None  # not an Esper run: a plain loop's end says nothing of rounds, accuracy or seeds
    out = Outcome(policy=_cut(str(policy)) if policy is not None else None)
    if finish is not None:
        out.final_accuracy, out.best_accuracy = finish.final_accuracy, finish.best_accuracy
        out.fossilized, out.pruned, out.rounds = finish.fossilized, finish.pruned, finish.rounds
    return out


def _where(status: list[str] | None, name: str | None) -> tuple[str, list]:
    clauses, args = [], []
    if status:
        clauses.append(f"status IN ({','.join('?' * len(status))})")
        args += status
    if name:
        escaped = name.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        clauses.append("LOWER(name) LIKE ? ESCAPE '\\'")
        args.append(f"%{escaped}%")
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", args


def page_runs(conn: Conn, limit: int, offset: int, status: list[str] | None, name: str | None, now: float,
              here: str) -> tuple[int, list[RunSummary]]:
    """(runs matching the filters, the page of them from ``offset``), newest first; ``connected`` says
    whether a server other than ``here`` holds one of a run's streams (the caller knows its own)."""
    where, args = _where(status, name)
    total = int(conn.execute(f"SELECT COUNT(*) FROM runs{where}", args).fetchone()[0])
    rows = conn.execute(
        "SELECT run_key, run_id, name, status, created_at, started_at, ended_at, last_seen_at, last_step, last_epoch,"
        f" config, finish, world_size, status_detail FROM runs{where} ORDER BY created_at DESC, run_key DESC"
        " LIMIT ? OFFSET ?", (*args, limit, offset)).fetchall()
    return total, [_summary(conn, row, now, here) for row in rows]


def _summary(conn: Conn, row: tuple, now: float, here: str) -> RunSummary:
    key, run_id, name, status, created, started, ended, seen, step, epoch, config, finish, world, why = row
    start = _started.decode(config) if config else None
    end = _finished.decode(finish) if finish else None
    last_seq, stored, held = {}, 0, False
    for rank, seq, nbytes, session, until in conn.execute(
            "SELECT rank, last_seq, bytes, session, held_until FROM streams WHERE run_key = ?", (key,)):
        last_seq[str(rank)] = seq
        stored += nbytes
        held = held or (until is not None and until >= now and session is not None and not session.startswith(here))
    stored += int(conn.execute("SELECT COALESCE(SUM(size), 0) FROM artifacts WHERE run_key = ?", (key,)).fetchone()[0])
    counts = dict(conn.execute("SELECT kind, n FROM kind_counts WHERE run_key = ? ORDER BY kind", (key,)))
    duration = None if started is None else max(0.0, (ended if ended is not None else seen) - started)
    return RunSummary(
        run_id=run_id, name=name, status=status, connected=held, created_at=created, started=started, ended=ended,
        started_at=started, ended_at=ended, last_seen_at=seen, duration_s=duration, ranks=world, last_step=step,
        last_epoch=epoch, last_seq=last_seq, counts=counts, stored_bytes=stored, status_detail=_cut(why),
        host=_cut(start.host) if start else None, device=_cut(start.device) if start else None,
        summary=_outcome(start, end), params=_params(start.config) if start else {},
    )
