"""Summaries of every series of every run (``leyline.summaries``), kept by the series pass as it charts.

The pass holds each series' new points (``Charted.series``): it folds them into the series' row of
``run_metrics`` (count, min, max, last, the step of the last point, best) in the transaction that writes
their chunks and moves the watermark, so a run's summaries are never computed by reading its points back,
and a run list sorted or filtered by a metric reads one indexed row per run. ``metric_directions`` holds the
directions a run declared (``run_started``'s ``summary``, ``summary`` events); a value set outright pins
its series' last and best (``pinned``). NaN is no min, max or best; a NaN last is stored as NULL.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from leyline.metrics import SummaryUpdated, as_float
from leyline.payloads import MAX_INT, RunStarted
from leyline.series import format_key
from leyline.summaries import BEST_STAT, MetricSummary, best_of, direction_of
from nissa_server.store.conn import Conn, insert_many

SCHEMA = """
    CREATE TABLE run_metrics (
        run_key {key} NOT NULL,
        key TEXT NOT NULL,
        name TEXT NOT NULL,
        direction TEXT NOT NULL,
        count BIGINT NOT NULL,
        min {real},
        max {real},
        last {real},
        step BIGINT,
        best {real},
        pinned SMALLINT NOT NULL DEFAULT 0,
        PRIMARY KEY (key, run_key)
    ){rowid};
    CREATE INDEX run_metrics_run ON run_metrics (run_key, key, count, min, max, last, step, best);
    CREATE TABLE metric_directions (
        run_key {key} NOT NULL,
        name TEXT NOT NULL,
        direction TEXT NOT NULL,
        PRIMARY KEY (run_key, name)
    ){rowid}
"""
"""``run_metrics``: one row per series of a run, by series key first (on SQLite the rows of one key lie together:
a filter or a sort on a metric over a lab's runs reads them in one stretch; on PostgreSQL the primary key's index
holds every figure too, from schema v11), and again by run with every figure (a page's runs read theirs from the index
alone); ``metric_directions``: what a run declared."""

BACKFILLED = "lab_backfilled"
"""The ``counters`` row that says what was stored before summaries and config rows existed was copied there."""


def _least(conn: Conn) -> str:
    return "MIN" if conn.greatest == "MAX" else "LEAST"


def _folded(conn: Conn, old: str, new: str, pick: str) -> str:
    """``pick`` (``MIN``/``LEAST`` or ``MAX``/``GREATEST``) of two values either of which may be NULL."""
    return f"{pick}(COALESCE({old}, {new}), COALESCE({new}, {old}))"


def _best(direction: str, low: str, high: str, last: str) -> str:
    """``leyline.summaries.best_of`` in SQL, generated from its table (``BEST_STAT``) for a ``direction`` column or
    parameter and the SQL of the statistics."""
    stats = {"min": low, "max": high, "last": last}
    cases = " ".join(f"WHEN '{direction_name}' THEN {stats[stat]}" for direction_name, stat in BEST_STAT.items())
    return f"CASE {direction} {cases} ELSE {last} END"


def _upsert(conn: Conn) -> str:
    least, greatest = _least(conn), conn.greatest
    low = _folded(conn, "run_metrics.min", "excluded.min", least)
    high = _folded(conn, "run_metrics.max", "excluded.max", greatest)
    last = "CASE WHEN run_metrics.pinned = 1 THEN run_metrics.last ELSE excluded.last END"
    return (
        "INSERT INTO run_metrics (run_key, key, name, direction, count, min, max, last, step, best, pinned)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT (key, run_key) DO UPDATE SET"
        " count = run_metrics.count + excluded.count,"
        f" min = {low}, max = {high},"
        " last = CASE WHEN excluded.pinned = 1 THEN excluded.last ELSE " + last + " END,"
        " step = CASE WHEN excluded.pinned = 1 OR run_metrics.pinned = 0 THEN excluded.step ELSE run_metrics.step END,"
        " best = CASE WHEN excluded.pinned = 1 THEN excluded.best WHEN run_metrics.pinned = 1 THEN run_metrics.best"
        f" ELSE {_best('run_metrics.direction', low, high, 'excluded.last')} END,"
        f" pinned = {greatest}(run_metrics.pinned, excluded.pinned)"
    )


def _number(value: float) -> float | None:
    return None if math.isnan(value) else value


def _stats(values: np.ndarray) -> tuple[int, float | None, float | None, float | None]:
    """(count, min, max, last) of a series' points (NaN: no min or max; a NaN last is None)."""
    if len(values) == 1:
        one = _number(float(values[0]))
        return 1, one, one, one
    finite = values[~np.isnan(values)]
    low = float(finite.min()) if len(finite) else None
    high = float(finite.max()) if len(finite) else None
    return len(values), low, high, _number(float(values[-1]))


def directions_of(conn: Conn, run_keys: Iterable[int]) -> dict[int, dict[str, str]]:
    keys = sorted(set(run_keys))
    out: dict[int, dict[str, str]] = {}
    for at in range(0, len(keys), 500):
        chunk = keys[at:at + 500]
        for run_key, name, direction in conn.execute(
                "SELECT run_key, name, direction FROM metric_directions WHERE run_key IN"
                f" ({','.join('?' * len(chunk))})",
                chunk):
            out.setdefault(int(run_key), {})[name] = direction
    return out


def _declare(conn: Conn, run_key: int, directions: dict[str, str], known: dict[str, str]) -> None:
    """A run declared how metrics are best: remembered, and the best of its series of those names set anew."""
    for name, direction in directions.items():
        if known.get(name) == direction:
            continue
        known[name] = direction
        conn.execute("INSERT INTO metric_directions (run_key, name, direction) VALUES (?,?,?) ON CONFLICT"
                     " (run_key, name) DO UPDATE SET direction = excluded.direction", (run_key, name, direction))
        conn.execute(f"UPDATE run_metrics SET direction = ?, best = CASE WHEN pinned = 1 THEN best ELSE "
                     f"{_best('CAST(? AS TEXT)', 'min', 'max', 'last')} END WHERE run_key = ? AND name = ?",
                     (direction, direction, run_key, name))


def stat_rows(series: Mapping[tuple[int, str], tuple[str, Sequence[np.ndarray]]]) -> list[tuple]:
    """The summaries' rows of a pass's points (``series``: arrays in ``series_sql.COLUMNS`` order, points in event
    order), each series' direction read from its name (``write_rows`` applies what its run declared): made before
    the pass's transaction."""
    rows = [stat_row(run_key, key, name, arrays[4], arrays[0])
            for (run_key, key), (name, arrays) in sorted(series.items())]
    return [row for row in rows if row is not None]


def stat_row(run_key: int, key: str, name: str, values: np.ndarray, steps: np.ndarray) -> tuple | None:
    """``stat_rows``' row of one series (None where it has no point)."""
    if not len(values):
        return None
    count, low, high, last = _stats(values)
    direction = direction_of(name)
    best = best_of(direction, min=low, max=high, last=last)
    return (run_key, key, name, direction, count, low, high, last, sql_step(steps[-1]), best, 0)


def sql_step(step: float) -> int:
    """A chart's step (a float) as the integer a summary keeps, clamped to 0..2⁶³−1: a step past 2⁵³ an older server
    took (2⁶³−1 is 2⁶³ as a float) would not fit the column and stop every later pass."""
    return max(0, min(int(step), MAX_INT))


def write(conn: Conn, series: dict[tuple[int, str], tuple[str, list[np.ndarray]]], declared: list[tuple],
          alive: set[int]) -> None:
    """Fold a pass's points and its declarations into the summaries of the runs in ``alive`` (``stat_rows``, then
    ``write_rows``)."""
    write_rows(conn, [r for r in stat_rows(series) if r[0] in alive], declared, alive)


def write_rows(conn: Conn, stats: list[tuple], declared: list[tuple], alive: set[int]) -> None:
    """Fold ``stat_rows`` (of runs in ``alive``) and a pass's declarations (``Charted.declared``, in id order) into
    the summaries of the runs in ``alive``."""
    runs = {r[0] for r in stats} | {d[0] for d in declared if d[0] in alive}
    if not runs:
        return
    known = directions_of(conn, runs)
    pins: list[tuple] = []
    for run_key, _, rank, step, payload in declared:
        if run_key not in alive:
            continue
        if isinstance(payload, RunStarted):
            if rank == 0 and payload.summary:
                _declare(conn, run_key, dict(payload.summary), known.setdefault(run_key, {}))
        elif isinstance(payload, SummaryUpdated):
            _declare(conn, run_key, dict(payload.directions), known.setdefault(run_key, {}))
            for name, value in payload.values.items():
                v = _number(as_float(value))
                direction = direction_of(name, known.get(run_key))
                pins.append((run_key, format_key(name, {"rank": str(rank)}), name, direction, 1, v, v, v, step, v, 1))
    if known:  # what runs declared overrides their names
        stats = [_declared(row, known[row[0]]) if row[0] in known and row[2] in known[row[0]] else row
                 for row in stats]
    upsert = _upsert(conn)
    if stats:
        insert_many(conn, upsert, stats)  # one row per series of a run: no two meet on its key
    for pin in pins:  # one at a time: a later value of the same series wins
        conn.execute(upsert, pin)


def _declared(row: tuple, declared: dict[str, str]) -> tuple:
    """A ``stat_rows`` row with the direction its run declared for its name."""
    run_key, key, name, _, count, low, high, last, step, _, pinned = row
    direction = declared[name]
    return (run_key, key, name, direction, count, low, high, last, step,
            best_of(direction, min=low, max=high, last=last), pinned)


def delete_run(conn: Conn, run_key: int) -> None:
    """Inside the transaction that deletes a run."""
    conn.execute("DELETE FROM run_metrics WHERE run_key = ?", (run_key,))
    conn.execute("DELETE FROM metric_directions WHERE run_key = ?", (run_key,))


def backfill(conn: Conn) -> int:
    """Summaries of the series charted before summaries were kept (once per database); series rows read
    one series at a time. Returns the series summarised."""
    from nissa_server.store.series_sql import unpacked

    series = conn.execute("SELECT DISTINCT run_key, key, name FROM series_chunks").fetchall()
    rows = []
    for run_key, key, name in series:
        chunks = conn.execute("SELECT value, step, n FROM series_chunks WHERE run_key = ? AND key = ? ORDER BY id",
                              (run_key, key)).fetchall()
        values = np.frombuffer(b"".join(bytes(unpacked(c[0], c[2])) for c in chunks), dtype=np.float64)
        if not len(values):
            continue
        last_step = np.frombuffer(bytes(unpacked(chunks[-1][1], chunks[-1][2])), dtype=np.float64)[-1]
        count, low, high, last = _stats(values)
        direction = direction_of(name)
        best = best_of(direction, min=low, max=high, last=last)
        rows.append((run_key, key, name, direction, count, low, high, last, sql_step(last_step), best, 0))
    if rows:
        conn.executemany(_upsert(conn), rows)
    return len(rows)


def backfill_once(conn: Conn) -> None:
    """At open, once per database: the summaries and config rows of what was stored before they existed."""
    from nissa_server.store import run_meta_sql

    if conn.execute("SELECT value FROM counters WHERE name = ?", (BACKFILLED,)).fetchone() is not None:
        return
    run_meta_sql.backfill(conn)
    backfill(conn)
    conn.execute("INSERT INTO counters (name, value) VALUES (?, 1)", (BACKFILLED,))


def read(conn: Conn, run_keys: list[int], keys: list[str] | None = None, per_run: int | None = None,
         pinned: bool = False) -> dict[int, dict[str, MetricSummary]]:
    """The summaries of runs, by series key (all of them, or ``keys``, or with ``pinned`` those of the values set
    outright: what the run said it achieved, ``run.summary``; at most ``per_run`` each, by key)."""
    out: dict[int, dict[str, MetricSummary]] = {k: {} for k in run_keys}
    if not run_keys:
        return out
    where = f"run_key IN ({','.join('?' * len(run_keys))})"
    args: list = list(run_keys)
    if keys is not None:
        if not keys:
            return out
        where += f" AND key IN ({','.join('?' * len(keys))})"
        args += keys
    if pinned:
        where += " AND pinned = 1"
    limit = ""
    if per_run is not None and len(run_keys) == 1:  # a run's rows only as far as they are kept
        limit, args = " LIMIT ?", [*args, per_run]
    rows = conn.execute(f"SELECT run_key, key, count, min, max, last, step, best FROM run_metrics WHERE {where}"
                        f" ORDER BY run_key, key{limit}", args).fetchall()  # fetchall: a row at a time costs more
    for run_key, key, count, low, high, last, step, best in rows:
        found = out[run_key]
        if per_run is not None and len(found) >= per_run:
            continue
        # Written without NaN (stored as NULL), so read as they are.
        found[key] = MetricSummary(last=last, min=low, max=high, best=best, count=count, step=step)
    return out
