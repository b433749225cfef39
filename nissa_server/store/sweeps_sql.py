"""Sweeps in the store: the sweep, its trials (each leased to an agent, each an ordinary run), the metric as
each trial reported it (for the pruners), and PBT's exploits. Every decision is taken inside the writer's
transaction, against these rows, so agents and servers that race each other cannot both take one trial."""

from __future__ import annotations

import math
from collections.abc import Iterable

import msgspec

from leyline.run_keys import stored_key
from leyline.summaries import Project
from leyline.sweeps import Exploit, SweepSpec, Trial, Value, trial_run_id
from leyline.text import scrub_tree
from nissa_server.store.conn import Conn

SCHEMA = """
    CREATE TABLE sweeps (
        sweep_id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        project TEXT NOT NULL,
        method TEXT NOT NULL,
        spec TEXT NOT NULL,
        status TEXT NOT NULL,
        message TEXT NOT NULL DEFAULT '',
        created_at {real} NOT NULL,
        ended_at {real},
        next_trial INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX sweeps_created ON sweeps (created_at);
    CREATE TABLE sweep_trials (
        sweep_id TEXT NOT NULL,
        trial_id INTEGER NOT NULL,
        run_id TEXT NOT NULL,
        status TEXT NOT NULL,
        params TEXT NOT NULL,
        origin INTEGER,
        agent TEXT,
        lease_until {real},
        exit_code INTEGER,
        metric {real},
        best {real},
        step BIGINT,
        next_check BIGINT NOT NULL DEFAULT 0,
        attrs TEXT NOT NULL DEFAULT '{{}}',
        message TEXT NOT NULL DEFAULT '',
        created_at {real} NOT NULL,
        ended_at {real},
        PRIMARY KEY (sweep_id, trial_id)
    ){rowid};
    CREATE INDEX sweep_trials_status ON sweep_trials (status, sweep_id);
    CREATE TABLE sweep_reports (
        sweep_id TEXT NOT NULL,
        trial_id INTEGER NOT NULL,
        step BIGINT NOT NULL,
        value {real} NOT NULL,
        PRIMARY KEY (sweep_id, trial_id, step)
    ){rowid};
    CREATE TABLE sweep_exploits (
        sweep_id TEXT NOT NULL,
        trial_id INTEGER NOT NULL,
        n INTEGER NOT NULL,
        body TEXT NOT NULL,
        checkpoint_id TEXT,
        restore_id TEXT,
        asked_at {real} NOT NULL,
        PRIMARY KEY (sweep_id, trial_id, n)
    ){rowid}
"""
"""The migration that brings them (the same on both stores)."""

_exploit = msgspec.json.Decoder(Exploit)
_params = msgspec.json.Decoder(dict[str, Value])
_enc = msgspec.json.Encoder()

TRIAL_COLUMNS = ("trial_id, run_id, status, params, origin, agent, lease_until, exit_code, metric, best, step, "
                 "next_check, attrs, message, ended_at")


class TrialRow(msgspec.Struct, kw_only=True):
    """A trial as stored."""

    trial_id: int
    run_id: str
    status: str
    params: dict[str, Value]
    origin: int | None
    agent: str | None
    lease_until: float | None
    exit_code: int | None
    metric: float | None
    best: float | None
    step: int | None
    next_check: int
    attrs: str
    message: str
    ended_at: float | None = None

    def public(self, lineage: list[Exploit]) -> Trial:
        return Trial(trial_id=self.trial_id, status=self.status, params=self.params,  # type: ignore[arg-type]
                     run_id=self.run_id, metric=self.metric, best=self.best, step=self.step, agent=self.agent,
                     message=self.message, lineage=lineage)


class SweepRow(msgspec.Struct, kw_only=True):
    sweep_id: str
    name: str
    project: str
    method: str
    spec: SweepSpec
    status: str
    message: str
    created_at: float
    next_trial: int


_spec = msgspec.json.Decoder(SweepSpec)


def _stored_spec(body: bytes | str) -> SweepSpec:
    """A stored spec. One stored before a rule it breaks (a control character in its command or values, a project
    the runs' rule refuses) is read as it would be taken now: those characters shown as U+FFFD, that project none."""
    try:
        return _spec.decode(body)
    except msgspec.ValidationError:
        raw = scrub_tree(msgspec.json.decode(body))
        if isinstance(raw, dict):
            try:
                msgspec.convert(raw.get("project", ""), Project)
            except msgspec.ValidationError:
                raw["project"] = ""
        return msgspec.convert(raw, SweepSpec)


def _sweep(row: tuple) -> SweepRow:
    return SweepRow(sweep_id=row[0], name=row[1], project=row[2], method=row[3], spec=_stored_spec(row[4]),
                    status=row[5], message=row[6], created_at=row[7], next_trial=row[8])


_SWEEP_COLUMNS = "sweep_id, name, project, method, spec, status, message, created_at, next_trial"


def _trial(row: tuple) -> TrialRow:
    return TrialRow(trial_id=row[0], run_id=row[1], status=row[2], params=_params.decode(row[3]), origin=row[4],
                    agent=row[5], lease_until=row[6], exit_code=row[7], metric=row[8], best=row[9], step=row[10],
                    next_check=row[11], attrs=row[12], message=row[13], ended_at=row[14])


def insert_sweep(conn: Conn, sweep_id: str, spec: SweepSpec, now: float) -> None:
    conn.execute("INSERT INTO sweeps (sweep_id, name, project, method, spec, status, created_at) "
                 "VALUES (?,?,?,?,?,?,?)",
                 (sweep_id, spec.name, spec.project, spec.method, _enc.encode(spec).decode(), "running", now))


def get_sweep(conn: Conn, sweep_id: str, *, lock: bool = False) -> SweepRow | None:
    suffix = conn.for_update if lock else ""
    row = conn.execute(f"SELECT {_SWEEP_COLUMNS} FROM sweeps WHERE sweep_id = ?{suffix}", (sweep_id,)).fetchone()
    return None if row is None else _sweep(row)


def list_sweeps(conn: Conn, limit: int) -> list[SweepRow]:
    rows = conn.execute(f"SELECT {_SWEEP_COLUMNS} FROM sweeps ORDER BY created_at DESC LIMIT ?", (limit,))
    return [_sweep(r) for r in rows.fetchall()]


def running_sweeps(conn: Conn) -> list[str]:
    """Sweeps running, and those ended with trials still running (followed until their runs end)."""
    return [r[0] for r in conn.execute(
        "SELECT sweep_id FROM sweeps WHERE status = 'running' UNION "
        "SELECT DISTINCT sweep_id FROM sweep_trials WHERE status = 'running'").fetchall()]


def end_sweep(conn: Conn, sweep_id: str, status: str, message: str, now: float) -> None:
    conn.execute("UPDATE sweeps SET status = ?, message = ?, ended_at = ? WHERE sweep_id = ? AND status = 'running'",
                 (status, message, now, sweep_id))


def extend_leases(conn: Conn, until: float) -> int:
    """Every running trial's lease lasts until ``until`` at least; how many were extended."""
    done = conn.execute("UPDATE sweep_trials SET lease_until = ? WHERE status = 'running' AND lease_until < ?",
                        (until, until))
    return max(0, done.rowcount)


def trials(conn: Conn, sweep_id: str) -> list[TrialRow]:
    rows = conn.execute(f"SELECT {TRIAL_COLUMNS} FROM sweep_trials WHERE sweep_id = ? ORDER BY trial_id",
                        (sweep_id,))
    return [_trial(r) for r in rows.fetchall()]


def new_trial(conn: Conn, sweep_id: str, params: dict[str, Value], now: float, *,
              origin: int | None = None, status: str = "queued", next_check: int = 0) -> int:
    """A trial numbered after the sweep's last (the sweep's row is the lock two servers meet on)."""
    trial_id = int(conn.execute("UPDATE sweeps SET next_trial = next_trial + 1 WHERE sweep_id = ? "
                                "RETURNING next_trial", (sweep_id,)).fetchone()[0])
    conn.execute("INSERT INTO sweep_trials (sweep_id, trial_id, run_id, status, params, origin, next_check, "
                 "created_at) VALUES (?,?,?,?,?,?,?,?)",
                 (sweep_id, trial_id, trial_run_id(sweep_id, trial_id), status, _enc.encode(params).decode(), origin,
                  next_check, now))
    return trial_id


def update_trial(conn: Conn, sweep_id: str, trial_id: int, **fields: object) -> None:
    """Set the named columns of one trial (names are this module's own, never a caller's text)."""
    names = list(fields)
    assert all(n in TRIAL_COLUMNS for n in names)
    values = [_enc.encode(v).decode() if n == "params" else v for n, v in fields.items()]
    conn.execute(f"UPDATE sweep_trials SET {', '.join(f'{n} = ?' for n in names)} "
                 "WHERE sweep_id = ? AND trial_id = ?", (*values, sweep_id, trial_id))


def add_reports(conn: Conn, sweep_id: str, rows: Iterable[tuple[int, int, float]]) -> None:
    """``(trial, step, value)`` as the tick saw them; a step reported before keeps its first value."""
    fresh = [(sweep_id, t, s, v) for t, s, v in rows if math.isfinite(v)]
    for row in fresh:
        conn.execute("INSERT INTO sweep_reports (sweep_id, trial_id, step, value) VALUES (?,?,?,?) "
                     "ON CONFLICT DO NOTHING", row)


def reports(conn: Conn, sweep_id: str) -> dict[int, dict[int, float]]:
    out: dict[int, dict[int, float]] = {}
    for trial_id, step, value in conn.execute(
            "SELECT trial_id, step, value FROM sweep_reports WHERE sweep_id = ? ORDER BY trial_id, step",
            (sweep_id,)).fetchall():
        out.setdefault(trial_id, {})[step] = value
    return out


def add_exploit(conn: Conn, sweep_id: str, trial_id: int, exploit: Exploit) -> int:
    n = int(conn.execute("SELECT COALESCE(MAX(n), 0) + 1 FROM sweep_exploits WHERE sweep_id = ? AND trial_id = ?",
                         (sweep_id, trial_id)).fetchone()[0])
    conn.execute("INSERT INTO sweep_exploits (sweep_id, trial_id, n, body, asked_at) VALUES (?,?,?,?,?)",
                 (sweep_id, trial_id, n, _enc.encode(exploit).decode(), exploit.at))
    return n


class ExploitRow(msgspec.Struct, kw_only=True):
    trial_id: int
    n: int
    exploit: Exploit
    checkpoint_id: str | None
    restore_id: str | None


def exploits(conn: Conn, sweep_id: str) -> list[ExploitRow]:
    rows = conn.execute("SELECT trial_id, n, body, checkpoint_id, restore_id FROM sweep_exploits "
                        "WHERE sweep_id = ? ORDER BY trial_id, n", (sweep_id,)).fetchall()
    return [ExploitRow(trial_id=r[0], n=r[1], exploit=_exploit.decode(r[2]), checkpoint_id=r[3], restore_id=r[4])
            for r in rows]


def update_exploit(conn: Conn, sweep_id: str, row: ExploitRow) -> None:
    conn.execute("UPDATE sweep_exploits SET body = ?, checkpoint_id = ?, restore_id = ? "
                 "WHERE sweep_id = ? AND trial_id = ? AND n = ?",
                 (_enc.encode(row.exploit).decode(), row.checkpoint_id, row.restore_id, sweep_id, row.trial_id,
                  row.n))


def run_error(conn: Conn, run_id: str) -> str:
    """What a run's ``run_finished`` said went wrong ("" when it said nothing)."""
    row = conn.execute("SELECT finish FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    if row is None or not row[0]:
        return ""
    try:
        error = msgspec.json.decode(bytes(row[0])).get("error")
    except (msgspec.DecodeError, AttributeError):
        return ""
    return error if isinstance(error, str) else ""


def run_states(conn: Conn, run_ids: list[str], metric: str) -> dict[str, tuple[str, float | None, float | None,
                                                                             int | None]]:
    """Each run's status and its metric's last value, best and step (rank 0's series when the run has ranks)."""
    out: dict[str, tuple[str, float | None, float | None, int | None]] = {}
    key = stored_key(metric)
    for run_id in run_ids:
        row = conn.execute("SELECT run_key, status FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            continue
        figures = conn.execute("SELECT last, best, step FROM run_metrics WHERE run_key = ? AND key = ?",
                               (row[0], key)).fetchone()
        out[run_id] = (row[1], *(figures if figures is not None else (None, None, None)))
    return out
