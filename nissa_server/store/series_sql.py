"""Series points and markers, written by the writer in the transaction that stores their events.

Charting a series of a long run must not read the run's events back (a million events is seconds of
decoding). The writer decodes each stored event once, applies ``leyline.series`` and keeps the points
column-wise: one ``series_chunks`` row holds consecutive points of one series as packed float64 arrays
(step, epoch, round, ts, value; NaN where a point has no round). A commit adds one row per series it
touched; rows are merged as they pile up (16 rows of a level into one row of the next level, which takes
the first one's id), so a series of a million points is a few dozen rows whichever way it was written,
and ``ORDER BY id`` is always the points' order. A row of ``SUMMARY_MIN`` points or more also keeps its
summary: the minimum and maximum of each block of ``SUMMARY_BLOCK`` points, what a chart of a long run
reads instead of every point (an eighth of the bytes; every block's extremes, so no spike is lost).
Markers (``leyline.series.marker_of``) get a row each.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

import msgspec
import numpy as np

from leyline import Event
from leyline.codec import DecodeError, decode_events
from leyline.series import X_AXES, marker_of, round_of, values_of
from nissa_server.store.conn import Conn

logger = logging.getLogger(__name__)

MERGE_AT = 16
"""Rows of one level that are merged into one row of the next."""
SUMMARY_BLOCK = 16
SUMMARY_MIN = 512
"""Points from which a row keeps a summary."""
COLUMNS = ("step", "epoch", "round", "ts", "value")
_marker_enc = msgspec.json.Encoder()
NAN = float("nan")


def schema_sql(blob: str, key: str) -> str:
    """The tables, idempotent: they sit beside the versioned schema and are created at every start."""
    return f"""
        CREATE TABLE IF NOT EXISTS series_chunks (
            id {key},
            run_key BIGINT NOT NULL,
            name TEXT NOT NULL,
            key TEXT NOT NULL,
            level INTEGER NOT NULL,
            n INTEGER NOT NULL,
            step_max DOUBLE PRECISION NOT NULL,
            epoch_max DOUBLE PRECISION NOT NULL,
            round_max DOUBLE PRECISION,
            ts_max DOUBLE PRECISION NOT NULL,
            -- Small columns first, the most read blobs next: SQLite walks the overflow pages of every
            -- blob before the one it reads.
            summary_n INTEGER,
            summary_value {blob},
            summary_step {blob},
            summary_ts {blob},
            summary_epoch {blob},
            summary_round {blob},
            value {blob} NOT NULL,
            step {blob} NOT NULL,
            ts {blob} NOT NULL,
            epoch {blob} NOT NULL,
            round {blob} NOT NULL
        );
        CREATE INDEX IF NOT EXISTS series_chunks_name ON series_chunks (run_key, name, key, id);
        CREATE TABLE IF NOT EXISTS series_markers (
            run_key BIGINT NOT NULL,
            event_id BIGINT NOT NULL,
            step DOUBLE PRECISION NOT NULL,
            epoch DOUBLE PRECISION NOT NULL,
            round DOUBLE PRECISION,
            ts DOUBLE PRECISION NOT NULL,
            body {blob} NOT NULL,
            PRIMARY KEY (run_key, event_id)
        );
    """


def delete_run(conn: Conn, run_key: int) -> None:
    """Inside the transaction that deletes a run."""
    conn.execute("DELETE FROM series_chunks WHERE run_key = ?", (run_key,))
    conn.execute("DELETE FROM series_markers WHERE run_key = ?", (run_key,))


class _Points:
    """Points of one series gathered in one transaction, column by column."""

    __slots__ = ("name", "step", "epoch", "round", "ts", "value")

    def __init__(self, name: str) -> None:
        self.name = name
        self.step: list[float] = []
        self.epoch: list[float] = []
        self.round: list[float] = []
        self.ts: list[float] = []
        self.value: list[float] = []

    def arrays(self) -> list[np.ndarray]:
        return [np.asarray(getattr(self, col), dtype=np.float64) for col in COLUMNS]


def summarize(arrays: list[np.ndarray]) -> list[np.ndarray]:
    """The points that are the minimum or maximum of their block of ``SUMMARY_BLOCK`` (in order)."""
    y = arrays[4]
    n = len(y) - len(y) % SUMMARY_BLOCK
    blocks = np.where(np.isnan(y[:n]), np.inf, y[:n]).reshape(-1, SUMMARY_BLOCK)
    starts = np.arange(0, n, SUMMARY_BLOCK)
    lows = starts + blocks.argmin(axis=1)
    highs = starts + np.where(np.isnan(y[:n]), -np.inf, y[:n]).reshape(-1, SUMMARY_BLOCK).argmax(axis=1)
    keep = np.unique(np.concatenate([lows, highs, np.arange(n, len(y)), np.flatnonzero(np.isnan(y))]))
    return [a[keep] for a in arrays]


_STORED_ORDER = (4, 0, 3, 1, 2)
"""The arrays (in ``COLUMNS`` order) in the order the table keeps them: value, step, ts, epoch, round."""


def _row_values(arrays: list[np.ndarray]) -> tuple:
    """The ``_COLS`` values of a chunk of ``arrays`` (in ``COLUMNS`` order)."""
    rounds = arrays[2]
    round_max = None if np.isnan(rounds).all() else float(np.nanmax(rounds))
    summary: tuple = (None,) * 6
    if len(arrays[0]) >= SUMMARY_MIN:
        short = summarize(arrays)
        summary = (len(short[0]), *(short[i].astype(np.float64).tobytes() for i in _STORED_ORDER))
    return (len(arrays[0]), float(arrays[0].max()), float(arrays[1].max()), round_max, float(arrays[3].max()),
            *summary, *(arrays[i].astype(np.float64).tobytes() for i in _STORED_ORDER))


_COLS = ("n, step_max, epoch_max, round_max, ts_max, summary_n, summary_value, summary_step, summary_ts, "
         "summary_epoch, summary_round, value, step, ts, epoch, round")
_INSERT = f"INSERT INTO series_chunks (run_key, name, key, level, {_COLS}) VALUES ({','.join('?' * 20)})"
_INSERT_AT = f"INSERT INTO series_chunks (id, run_key, name, key, level, {_COLS}) VALUES ({','.join('?' * 21)})"
_MARKER = ("INSERT INTO series_markers (run_key, event_id, step, epoch, round, ts, body) VALUES (?,?,?,?,?,?,?) "
           "ON CONFLICT DO NOTHING")


class SeriesWriter:
    """Turns the events of a transaction into series rows; lives on the writer thread."""

    def __init__(self) -> None:
        self._rows: dict[tuple[int, str], list[int]] = {}
        """(run key, series key) → rows per level: a hint of when to merge (wrong after a rollback:
        a merge then finds fewer rows, or happens later, and the data stays right)."""
        self.seconds = 0.0
        """CPU time the writer's thread spent on series (what charts cost ingest), for benchmarks."""

    def forget(self) -> None:
        """After a rollback, or once a run is deleted: the hints may be wrong."""
        self._rows.clear()

    def write(self, conn: Conn, stored: Iterable[tuple[int, int, bytes]]) -> None:
        """Points and markers of ``stored`` blocks: (run key, first event id, body of the block's events)."""
        began = time.thread_time()
        series: dict[tuple[int, str], _Points] = {}
        markers: list[tuple] = []
        for run_key, first_id, body in stored:
            for i, event in enumerate(_events(body)):
                self._gather(run_key, first_id + i, event, series, markers)
        for (run_key, key), points in series.items():
            arrays = points.arrays()
            conn.execute(_INSERT, (run_key, points.name, key, 0, *_row_values(arrays)))
            self._merge(conn, run_key, points.name, key)
        if markers:
            conn.executemany(_MARKER, markers)
        self.seconds += time.thread_time() - began

    @staticmethod
    def _gather(run_key: int, event_id: int, event: Event, series: dict[tuple[int, str], _Points],
                markers: list[tuple]) -> None:
        rnd = round_of(event)
        step, epoch, rnd, ts = event.step, event.epoch, NAN if rnd is None else rnd, event.ts
        for key, name, value in values_of(event):
            acc = series.get((run_key, key))
            if acc is None:
                acc = series[(run_key, key)] = _Points(name)
            acc.step.append(step)
            acc.epoch.append(epoch)
            acc.round.append(rnd)
            acc.ts.append(ts)
            acc.value.append(value)
        marker = marker_of(event)
        if marker is not None:
            markers.append((run_key, event_id, marker.step, marker.epoch or 0, marker.round, marker.ts,
                            _marker_enc.encode(marker)))

    def _merge(self, conn: Conn, run_key: int, name: str, key: str) -> None:
        levels = self._rows.setdefault((run_key, key), [])
        level = 0
        while True:
            while len(levels) <= level:
                levels.append(0)
            levels[level] += 1
            if levels[level] < MERGE_AT:
                return
            levels[level] = 0
            if not self._merge_level(conn, run_key, name, key, level):
                return
            level += 1

    @staticmethod
    def _merge_level(conn: Conn, run_key: int, name: str, key: str, level: int) -> bool:
        rows = conn.execute(
            "SELECT id, step, epoch, round, ts, value FROM series_chunks WHERE run_key = ? AND name = ? AND key = ? "
            "AND level = ? ORDER BY id", (run_key, name, key, level)).fetchall()
        if len(rows) < 2:
            return False
        arrays = [np.concatenate([np.frombuffer(bytes(r[c]), dtype=np.float64) for r in rows]) for c in range(1, 6)]
        first = rows[0][0]
        conn.execute("DELETE FROM series_chunks WHERE run_key = ? AND name = ? AND key = ? AND level = ?",
                     (run_key, name, key, level))
        conn.execute(_INSERT_AT, (first, run_key, name, key, level + 1, *_row_values(arrays)))
        return True


def _events(body: bytes) -> list[Event]:
    try:
        return decode_events(b"[" + body + b"]")
    except DecodeError as err:  # stored events were validated at ingest; one that is not stays out of charts
        logger.warning("events not charted: %s", err)
        return []


assert COLUMNS[:4] == X_AXES
