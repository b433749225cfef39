"""Series points and markers, written behind the events by the series pass (``series_pass``).

Charting a series of a long run must not read the run's events back (a million events is seconds of
decoding). A pass gathers the points of the events committed since the watermark (``series_progress``;
``series_gather``: the definition of ``leyline.series`` compiled per payload type) and keeps them
column-wise: one ``series_chunks`` row holds consecutive points of one series as packed float64 arrays
(step, epoch, round, ts, value; NaN where a point has no round), a column whose points all hold the same
value keeping it once (``packed``: a second's epoch and round, mostly; ``unpacked`` reads it). A pass adds
one row per series it touched and moves the watermark in the same transaction; rows are merged as they pile
up (16 rows of a level into one row of the next level, which takes the first one's id), so a series of a million
points is a few dozen rows whichever way it was written, and ``ORDER BY id`` is always the points' order.
A row of ``SUMMARY_MIN`` points or more also keeps its summary: the minimum and maximum of each block of
``SUMMARY_BLOCK`` points, what a chart of a long run reads instead of every point (an eighth of the
bytes; every block's extremes, so no spike is lost).
Markers (``leyline.series.marker_of``) get a row each. Each label of a series is a row of ``series_labels``
(written once, with the series' first row): a read of the series with given labels (``labels=i=5``) finds
their keys there, never scanning every label set of the name.
"""

from __future__ import annotations

import collections
import random
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import msgspec
import numpy as np

from leyline.series import X_AXES, parse_key
from nissa_server.store import series_split, summaries_sql
from nissa_server.store.conn import Conn, insert_many
from nissa_server.store.series_gather import Charted

MERGE_AT = 16
"""Rows of one level that are merged into one row of the next."""
SUMMARY_BLOCK = 16
SUMMARY_MIN = 4096
"""Points from which a row keeps a summary (a pass's rows seldom have as many: summaries are for merged rows,
which hold most of a long run's points)."""
STEP_ROWS = 1000
"""Series ``SeriesWriter.rows_steps`` makes the rows of in one step at most."""
MAX_INDEXED = 1_000_000
"""Series whose labels a writer remembers having written, at most."""
COLUMNS = ("step", "epoch", "round", "ts", "value")
_marker_enc = msgspec.json.Encoder()


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
        CREATE TABLE IF NOT EXISTS series_progress (
            id INTEGER PRIMARY KEY,
            upto BIGINT NOT NULL
        );
        {series_split.SCHEMA}
        CREATE TABLE IF NOT EXISTS series_labels (
            run_key BIGINT NOT NULL,
            name TEXT NOT NULL,
            label TEXT NOT NULL,
            value TEXT NOT NULL,
            key TEXT NOT NULL,
            PRIMARY KEY (run_key, name, label, value, key)
        );
    """


def init_progress(conn: Conn, upto: int) -> None:
    """The watermark of a database that has none: ``upto``, the newest event id. Events up to it were
    charted in the transaction that stored them, before the pass existed (or were stored before series
    were, and stay uncharted as they were)."""
    conn.execute("INSERT INTO series_progress (id, upto) VALUES (1, ?) ON CONFLICT DO NOTHING", (upto,))


LABELS_INDEXED = 2
"""The ``series_progress`` row that says ``series_labels`` holds the labels of every series charted before it
existed (``index_labels``)."""
_LABEL = "INSERT INTO series_labels (run_key, name, label, value, key) VALUES (?,?,?,?,?) ON CONFLICT DO NOTHING"


def label_rows(series: Iterable[tuple[int, str, str]]) -> list[tuple[int, str, str, str, str]]:
    """The ``series_labels`` rows of (run key, name, key) each: one per label."""
    return [(run_key, name, label, value, key) for run_key, name, key in series
            for label, value in parse_key(key)[1].items()]


def index_labels(conn: Conn) -> None:
    """Once per database (at start-up, in a transaction): the labels of the series charted before
    ``series_labels`` existed."""
    if conn.execute("SELECT 1 FROM series_progress WHERE id = ?", (LABELS_INDEXED,)).fetchone() is None:
        charted = conn.execute("SELECT DISTINCT run_key, name, key FROM series_chunks").fetchall()
        conn.executemany(_LABEL, label_rows((int(r[0]), r[1], r[2]) for r in charted))
        conn.execute("INSERT INTO series_progress (id, upto) VALUES (?, 1) ON CONFLICT DO NOTHING", (LABELS_INDEXED,))


def watermark(conn: Conn, *, lock: bool = False) -> int:
    """Every event up to this id is charted in ``series_chunks`` and ``series_markers``; those after are not.
    ``lock``: its row locked until the transaction ends (a pass or a merge: one server at a time)."""
    row = conn.execute(f"SELECT upto FROM series_progress WHERE id = 1{conn.for_update if lock else ''}").fetchone()
    return int(row[0])


def delete_run(conn: Conn, run_key: int) -> None:
    """Inside the transaction that deletes a run."""
    conn.execute("DELETE FROM series_chunks WHERE run_key = ?", (run_key,))
    conn.execute("DELETE FROM series_markers WHERE run_key = ?", (run_key,))
    conn.execute("DELETE FROM series_labels WHERE run_key = ?", (run_key,))


def summarize(arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
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


def _row_values(arrays: Sequence[np.ndarray]) -> tuple:
    """The ``_COLS`` values of a chunk of ``arrays`` (float64, in ``COLUMNS`` order). A commit of a lab's
    load writes hundreds of short rows: a few numpy calls each, no copies; a row of one point (a run that logs
    a hundred thousand names once each) none."""
    step, epoch, rounds, ts = arrays[:4]
    if len(step) == 1:
        round_one = float(rounds[0])
        return (1, float(step[0]), float(epoch[0]), None if round_one != round_one else round_one, float(ts[0]),
                *(None,) * 6, *(arrays[i].tobytes() for i in _STORED_ORDER))
    round_max = float(np.fmax.reduce(rounds))  # NaN only where no point has a round
    summary: tuple = (None,) * 6
    if len(step) >= SUMMARY_MIN:
        short = summarize(arrays)
        summary = (len(short[0]), *(packed(short[i]) for i in _STORED_ORDER))
    return (len(step), float(step.max()), float(epoch.max()), None if round_max != round_max else round_max,
            float(ts.max()), *summary, *(packed(arrays[i]) for i in _STORED_ORDER))


def packed(column: np.ndarray) -> bytes:
    """A float64 column as a row keeps it: its one value (8 bytes) where every point holds it, NaN included."""
    bits = column.view(np.uint64)
    if len(bits) > 1 and (bits == bits[0]).all():
        return column[:1].tobytes()
    return column.tobytes()


def unpacked(blob: bytes | memoryview, n: int) -> bytes | memoryview:
    """A stored column of ``n`` points as all their float64 bytes (``packed`` read back; a row written
    before columns were packed is read as it is)."""
    return bytes(blob) * n if len(blob) == 8 else blob


_COLS = ("n, step_max, epoch_max, round_max, ts_max, summary_n, summary_value, summary_step, summary_ts, "
         "summary_epoch, summary_round, value, step, ts, epoch, round")
_INSERT = f"INSERT INTO series_chunks (run_key, name, key, level, {_COLS}) VALUES ({','.join('?' * 20)})"
_INSERT_AT = f"INSERT INTO series_chunks (id, run_key, name, key, level, {_COLS}) VALUES ({','.join('?' * 21)})"
_MARKER = ("INSERT INTO series_markers (run_key, event_id, step, epoch, round, ts, body) VALUES (?,?,?,?,?,?,?) "
           "ON CONFLICT DO NOTHING")


@dataclass
class PassRows:
    """What a pass writes, made before its transaction (``SeriesWriter.rows_steps``, on the event loop a slice at a
    time): the transaction only hands them to the database."""

    chunks: list[tuple] = field(default_factory=list)
    """``series_chunks`` rows (run key first)."""
    labels: list[tuple] = field(default_factory=list)
    """``series_labels`` rows of the series the writer had not indexed."""
    indexed: list[tuple[int, str]] = field(default_factory=list)
    """(run key, series key) of those series."""
    stats: list[tuple] = field(default_factory=list)
    """``summaries_sql.stat_rows`` of the series."""
    markers: list[tuple] = field(default_factory=list)
    """``series_markers`` rows."""
    declared: list[tuple] = field(default_factory=list)
    """``Charted.declared``."""
    runs: set[int] = field(default_factory=set)
    """The runs the rows are of."""

    def of_runs(self, alive: set[int]) -> PassRows:
        """Only the rows of the runs in ``alive``."""
        def kept(rows: list) -> list:
            return [r for r in rows if r[0] in alive]

        return PassRows(kept(self.chunks), kept(self.labels), kept(self.indexed), kept(self.stats), kept(self.markers),
                        kept(self.declared), self.runs & alive)

    def without(self, done: set[tuple[int, str]]) -> PassRows:
        """Only the rows of the series not in ``done`` (run key, key): a part that another one wrote already."""
        if not done:
            return self
        return PassRows([r for r in self.chunks if (r[0], r[2]) not in done],
                        [r for r in self.labels if (r[0], r[4]) not in done],
                        [r for r in self.indexed if r not in done], [r for r in self.stats if (r[0], r[1]) not in done],
                        self.markers, self.declared, self.runs)


class SeriesWriter:
    """Writes what a pass charted, and the merges that fall due; runs where ``Store.series_call`` runs it (the
    writer's thread, or PostgreSQL's series connection's)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.token = random.getrandbits(62) + 1
        """Says which writer writes a pass in parts (``series_split.OWNER``)."""
        self._rows: dict[tuple[int, str], tuple[int, ...]] = {}
        """(run key, series key) → rows per level: a hint of when to merge (wrong after a rollback, or
        where another server's pass wrote too: a merge then finds fewer rows, or happens later, and the data
        stays right). Tuples of numbers: the collector does not walk them."""
        self.due: collections.deque[tuple[int, str, str, int]] = collections.deque()
        """Merges to do: (run key, name, series key, level)."""
        self._indexed: set[tuple[int, str]] = set()
        """(run key, series key) whose labels are in ``series_labels`` (written in a transaction that committed,
        here or on another server)."""
        self.seconds = 0.0
        """CPU time the writer's thread spent writing series (with the pass's gathering: what charts cost
        ingest), for benchmarks."""

    def forget(self) -> None:
        """After a rollback, or once a run is deleted: the hints may be wrong."""
        self._rows.clear()
        self.due.clear()
        self._indexed.clear()

    def rows_steps(self, charted: Charted, parts: list[PassRows], per_part: int) -> Iterator[None]:
        """The rows of ``charted`` into ``parts``, ``per_part`` series a part (one part at least, the last holds the
        markers and the declarations), a step every ``STEP_ROWS`` series (for the event loop, as
        ``Gathered.series_steps``); each series' row counted towards its merges (a hint: a pass that fails counts it
        too)."""
        indexed = self._indexed
        out = PassRows()
        parts.append(out)
        for i, ((run_key, key), (name, arrays)) in enumerate(charted.series.items(), 1):
            out.chunks.append((run_key, name, key, 0, *_row_values(arrays)))
            stat = summaries_sql.stat_row(run_key, key, name, arrays[4], arrays[0])
            if stat is not None:
                out.stats.append(stat)
            self._count(run_key, name, key, 0)
            if (run_key, key) not in indexed:
                out.indexed.append((run_key, key))
                out.labels += label_rows(((run_key, name, key),))
            if not i % per_part and i < len(charted.series):
                out = PassRows()
                parts.append(out)
            if not i % STEP_ROWS:
                yield
        out.markers = [(run_key, event_id, m.step, m.epoch or 0, m.round, m.ts, _marker_enc.encode(m))
                       for run_key, event_id, m in charted.markers]
        out.declared = charted.declared
        for part in parts:
            part.runs = {r[0] for r in part.chunks}
        out.runs |= {m[0] for m in charted.markers} | {d[0] for d in charted.declared}

    def rows_of(self, charted: Charted) -> PassRows:
        """``rows_steps`` at once, in one part."""
        parts: list[PassRows] = []
        for _ in self.rows_steps(charted, parts, per_part=len(charted.series) + 1):
            pass
        return parts[0]

    def write_pass(self, conn: Conn, mark: int, end: int, rows: PassRows, last: bool = True,
                   again: bool = False, seen: tuple[int, float] | None = None) -> bool:
        """``rows`` of the events after id ``mark`` up to ``end`` in the writer's transaction; with the ``last`` part
        of a pass, the watermark moved to ``end``; a part before it noted as written (``series_split``); ``again``: a
        part of a pass in parts that stopped halfway, its series written already left out. False (nothing written)
        where the watermark is no longer ``mark`` (another server's pass on a shared database charted them first),
        or a pass in parts other than this one is in progress, or another writer took this one over, or its writer
        wrote a part since the take-over ``seen`` it (writer, stamp) idle (read again here, under the lock)."""
        began = time.thread_time()
        if watermark(conn, lock=True) != mark:
            return False
        pending, owner, touched = series_split.state(conn)
        if pending and pending <= mark:  # the watermark passed it (a server that knows no parts charted it): over
            series_split.end(conn)
            pending = 0
        if (again or pending) and pending != end or pending and not again and owner != self.token:
            return False
        if again and seen is not None and owner != self.token and (owner, touched) != seen:
            return False  # its writer went on meanwhile
        if again:
            rows = rows.without(series_split.written(conn, rows.runs))
        keys = sorted(rows.runs)
        alive = {r[0] for r in conn.execute(
            f"SELECT run_key FROM runs WHERE run_key IN ({','.join('?' * len(keys))})", keys)} if keys else set()
        if alive != rows.runs:  # a run deleted meanwhile stays so
            rows = rows.of_runs(alive)
        if rows.chunks:
            insert_many(conn, _INSERT, rows.chunks)
        if rows.labels:
            insert_many(conn, _LABEL, rows.labels)
        if len(self._indexed) + len(rows.indexed) > MAX_INDEXED:
            self._indexed.clear()  # a flood of label sets: they are written again, and found there
        self._indexed.update(rows.indexed)
        summaries_sql.write_rows(conn, rows.stats, rows.declared if last else [], alive)
        if pending or not last:  # stamped as the part ends: its length is not counted as the writer idle
            series_split.claim(conn, end, self.token, self.clock())
        if not last:
            series_split.note(conn, [(r[0], r[2]) for r in rows.chunks])
        else:
            if rows.markers:
                conn.executemany(_MARKER, rows.markers)
            if pending:
                series_split.end(conn)
            conn.execute("UPDATE series_progress SET upto = ? WHERE id = 1", (end,))
        self.seconds += time.thread_time() - began
        return True

    def _count(self, run_key: int, name: str, key: str, level: int) -> None:
        """One more row of ``level``; a merge is due at every ``MERGE_AT``."""
        levels = self._rows.get((run_key, key))
        if levels is None:
            # A pass writes a row to every series it touched: counted alike, a lab's hundreds of series would
            # all merge at once. Each starts at its own place (runs' series have the same keys: the run too).
            levels = (zlib.crc32(f"{run_key} {key}".encode()) % MERGE_AT,)
        if len(levels) <= level:
            levels += (0,) * (level + 1 - len(levels))
        count = levels[level] + 1
        if count >= MERGE_AT:
            count = 0
            self.due.append((run_key, name, key, level))
        self._rows[(run_key, key)] = (*levels[:level], count, *levels[level + 1:])

    def merge_next(self, conn: Conn) -> None:
        """The next due merge, in the writer's transaction (a few milliseconds: merges are spread out, not
        written with a pass). The watermark's row is locked as a pass locks it: on a shared database one
        server merges a series at a time."""
        if not self.due:
            return
        began = time.thread_time()
        run_key, name, key, level = self.due.popleft()
        watermark(conn, lock=True)
        if self._merge_level(conn, run_key, name, key, level):
            self._count(run_key, name, key, level + 1)
        self.seconds += time.thread_time() - began

    @staticmethod
    def _merge_level(conn: Conn, run_key: int, name: str, key: str, level: int) -> bool:
        rows = conn.execute(
            "SELECT id, step, epoch, round, ts, value, n FROM series_chunks WHERE run_key = ? AND name = ? "
            "AND key = ? AND level = ? ORDER BY id", (run_key, name, key, level)).fetchall()
        if len(rows) < 2:
            return False
        arrays = [np.frombuffer(b"".join([unpacked(r[c], r[6]) for r in rows]), dtype=np.float64) for c in range(1, 6)]
        first = rows[0][0]
        ids = [r[0] for r in rows]
        conn.execute(f"DELETE FROM series_chunks WHERE id IN ({','.join('?' * len(ids))})", ids)
        conn.execute(_INSERT_AT, (first, run_key, name, key, level + 1, *_row_values(arrays)))
        return True


assert COLUMNS[:4] == X_AXES
