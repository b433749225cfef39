"""Reads of series and markers (see ``series_sql``): the listing, one name's points on one x axis, markers.

Each read sees one commit (``Conn.snapshot``): the rows charted up to the watermark, and the points of
the run's events after it gathered as it reads (``series_pass`` charts them about a second later), so
what a read returns is every committed event's, neither missed nor counted twice."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Concatenate, ParamSpec, TypeVar

import msgspec
import numpy as np

from leyline.series import X_AXES, Marker, parse_key
from nissa_server.store import series_split
from nissa_server.store.conn import Conn
from nissa_server.store.series_gather import Charted
from nissa_server.store.series_sql import unpacked, watermark

AXIS_COLUMNS = {"step": "step", "epoch": "epoch", "round": "round", "ts": "ts"}
"""x axis → its column (a fixed set: the names go into SQL text)."""
_markers = msgspec.json.Decoder(Marker)
P = ParamSpec("P")
T = TypeVar("T")
SUMMARY_USE = 16
"""Summaries are read for a series over this many times the points asked for (they hold about an eighth)."""


@dataclass
class SeriesData:
    """The points of one series on one x axis, in stored order (points with no place on it left out)."""

    key: str
    x: np.ndarray
    y: np.ndarray
    stored: int = 0
    """Points stored (in the rows read): more than ``len(x)`` where summaries were read."""


def in_snapshot(fn: Callable[Concatenate[Conn, P], T]) -> Callable[Concatenate[Conn, P], T]:
    """``fn(conn, …)`` inside a read transaction that sees one commit."""
    @functools.wraps(fn)
    def wrapper(conn: Conn, /, *args: P.args, **kwargs: P.kwargs) -> T:
        conn.execute(conn.snapshot)
        try:
            return fn(conn, *args, **kwargs)
        finally:
            conn.execute("COMMIT")
    return wrapper


TAIL_BYTES = 1024 * 1024
"""Bytes of events past the watermark one read charts for itself at most (a fraction of a second of a fast
trainer's; a run that logs a hundred thousand names charts as many series out of a few MiB): a run with more waits
for the series pass to chart them (``TailTooLong``), rather than each of its reads doing it."""


class TailTooLong(RuntimeError):
    """More of the run's events are past the watermark than one read charts (``TAIL_BYTES``)."""


def _tail(conn: Conn, run_key: int) -> Charted:
    """The points and markers of the run's events past the watermark (not charted yet); ``TailTooLong`` where they
    are more than ``TAIL_BYTES``."""
    mark = watermark(conn)
    waiting = int(conn.execute("SELECT COALESCE(SUM(LENGTH(body)), 0) FROM event_blocks WHERE run_key = ? AND id > ?",
                               (run_key, mark)).fetchone()[0])
    if waiting > TAIL_BYTES:
        raise TailTooLong(f"{waiting >> 10} KiB of the run's newest events are not charted yet, more than one read "
                          f"charts ({TAIL_BYTES >> 10} KiB): ask again in a second")
    rows = conn.execute("SELECT id, body FROM event_blocks WHERE run_key = ? AND id > ? ORDER BY id",
                        (run_key, mark)).fetchall()
    return series_split.tail(conn, run_key, mark, [(int(first_id), bytes(body)) for first_id, body in rows])


@in_snapshot
def list_series(conn: Conn, run_key: int, after: str | None, limit: int) -> list[tuple[str, str, int]]:
    """(key, name, points) of the series of a run, by key: those after the key ``after``, at most ``limit``."""
    where, params = ("run_key = ?", (run_key,)) if after is None else ("run_key = ? AND key > ?", (run_key, after))
    rows = conn.execute(f"SELECT key, name, SUM(n) FROM series_chunks WHERE {where} GROUP BY key, name "
                        "ORDER BY key LIMIT ?", (*params, limit)).fetchall()
    found = {row[0]: (row[1], int(row[2])) for row in rows}
    for (_, key), (name, arrays) in _tail(conn, run_key).series.items():
        if after is None or key > after:
            had = found.get(key, (name, 0))[1]
            found[key] = (name, had + len(arrays[0]))
    return [(key, name, n) for key, (name, n) in sorted(found.items())[:limit]]


@in_snapshot
def label_values(conn: Conn, run_key: int, name: str, label: str, limit: int) -> set[str]:
    """The values the label ``label`` takes in the run's series called ``name`` (at most ``limit`` of them
    charted, and those of the events not charted yet): a distribution's names, from its count series."""
    rows = conn.execute("SELECT DISTINCT value FROM series_labels WHERE run_key = ? AND name = ? AND label = ? "
                        "LIMIT ?", (run_key, name, label, limit)).fetchall()
    found = {str(row[0]) for row in rows}
    for (_, key), (series, _) in _tail(conn, run_key).series.items():
        if series == name and (value := parse_key(key)[1].get(label)) is not None:
            found.add(value)
    return found


class TooManySeries(ValueError):
    """More series of one name (label sets) than one reply holds."""


@dataclass
class SeriesPage:
    """The series of one run that one reply holds, in key order."""

    series: list[SeriesData]
    more: bool
    """Series past the last one here wait for the next page (the byte budget ran out)."""
    spent: int
    """Of the budget, what these series may cost at most."""


Cost = Callable[[str, int], int]
"""The most bytes a series with this key and this many points in the reply costs in a reply."""
_IN = 500
"""Keys per ``IN (…)`` list."""


def _label_keys(conn: Conn, run_key: int, name: str, labels: dict[str, str], after_key: str | None,
                limit: int) -> list[str]:
    """Keys of the charted series called ``name`` with all of ``labels``, after ``after_key``, from the label
    index (``series_labels``): what it reads is the matching label sets, not every label set of the name."""
    part = "SELECT key FROM series_labels WHERE run_key = ? AND name = ? AND label = ? AND value = ?"
    if after_key is not None:
        part += " AND key > ?"
    params: list = []
    for label, value in labels.items():
        params += [run_key, name, label, value] + ([after_key] if after_key is not None else [])
    query = " INTERSECT ".join([part] * len(labels)) + " ORDER BY key LIMIT ?"
    return [row[0] for row in conn.execute(query, (*params, limit))]


def _keys(conn: Conn, run_key: int, name: str, labels: dict[str, str] | None, after_key: str | None,
          limit: int) -> list[str]:
    """Keys of the charted series called ``name`` (with all of ``labels``) after ``after_key``, in order, at
    most ``limit``: an index range, never every label set of a name."""
    if labels:
        return _label_keys(conn, run_key, name, labels, after_key, limit)
    where = "run_key = ? AND name = ?"
    params: tuple[object, ...] = (run_key, name)
    if after_key is not None:
        where, params = where + " AND key > ?", (*params, after_key)
    return [row[0] for row in conn.execute(
        f"SELECT DISTINCT key FROM series_chunks WHERE {where} ORDER BY key LIMIT ?", (*params, limit))]


def _sizes(conn: Conn, run_key: int, name: str, keys: list[str], after_sql: str, after: tuple) -> dict[str, int]:
    """Points stored of each of ``keys`` (in its rows with points after ``after``; keys with none left out)."""
    sizes: dict[str, int] = {}
    for at in range(0, len(keys), _IN):
        chunk = keys[at:at + _IN]
        for key, n in conn.execute(
                f"SELECT key, SUM(n) FROM series_chunks WHERE run_key = ? AND name = ? AND key IN "
                f"({','.join('?' * len(chunk))}){after_sql} GROUP BY key", (run_key, name, *chunk, *after)):
            sizes[key] = int(n)
    return sizes


@in_snapshot
def read_series(conn: Conn, run_key: int, name: str, axis: str, after: float | None,
                max_points: int | None = None, labels: dict[str, str] | None = None,
                max_series: int | None = None, after_key: str | None = None, budget: int | None = None,
                cost: Cost | None = None, first: bool = True) -> SeriesPage:
    """The series called ``name`` of a run (those with all of ``labels``, those after the key ``after_key``),
    in key order: their points on ``axis``, only those with x above ``after``; ``TooManySeries`` if they are
    more than ``max_series``. With a ``budget``, only as many series as ``cost`` (of a series' key and its
    points in the reply, at most ``max_points``) says fit in it (one at least if ``first``: the first run of a
    reply); ``more`` says whether others wait.

    For a chart of at most ``max_points`` points of a series many times longer, the rows' summaries are
    read where they have one (each block's extremes: what a min/max downsampling keeps anyway)."""
    col = AXIS_COLUMNS[axis]
    after_sql, after_params = (f" AND {col}_max > ?", (after,)) if after is not None else ("", ())
    limit = (max_series + 1) if max_series is not None else 1 << 62
    sizes = _sizes(conn, run_key, name, _keys(conn, run_key, name, labels, after_key, limit), after_sql, after_params)
    at = X_AXES.index(axis)
    keep = _label_filter(labels)
    tail = {key: (arrays[at], arrays[4]) for (_, key), (own, arrays) in _tail(conn, run_key).series.items()
            if own == name and keep(key) and (after_key is None or key > after_key)}
    for key, (x, _) in tail.items():
        sizes[key] = sizes.get(key, 0) + len(x)
    if max_series is not None and len(sizes) > max_series:
        raise TooManySeries(f"at least {len(sizes)} series are called {name!r} (label sets), more than the "
                            f"{max_series} one reply holds: choose some with labels=")
    chosen, spent = _fitting(sorted(sizes), sizes, max_points, budget, cost, first)
    data = _points(conn, run_key, name, col, after, after_sql, after_params, chosen, sizes, max_points, tail)
    return SeriesPage(data, more=len(chosen) < len(sizes), spent=spent)


def _label_filter(labels: dict[str, str] | None) -> Callable[[str], bool]:
    if not labels:
        return lambda key: True
    return lambda key: all(parse_key(key)[1].get(k) == v for k, v in labels.items())


def _fitting(keys: list[str], sizes: dict[str, int], max_points: int | None, budget: int | None,
             cost: Cost | None, first: bool) -> tuple[list[str], int]:
    """The first of ``keys`` whose cost fits in ``budget`` (one at least if ``first``), and what they may cost."""
    if budget is None or cost is None:
        return keys, 0
    spent = 0
    for i, key in enumerate(keys):
        one = cost(key, sizes[key] if max_points is None else min(sizes[key], max_points))
        if spent + one > budget and (i or not first):
            return keys[:i], spent
        spent += one
    return keys, spent


def _points(conn: Conn, run_key: int, name: str, col: str, after: float | None, after_sql: str, after_params: tuple,
            keys: list[str], sizes: dict[str, int], max_points: int | None,
            tail: dict[str, tuple[np.ndarray, np.ndarray]]) -> list[SeriesData]:
    """The points of ``keys`` on the axis ``col``: their rows (summaries where a series is long), then the
    tail's."""
    short = {k for k in keys if max_points is not None and after is None and sizes[k] > SUMMARY_USE * max_points}
    execute = getattr(conn, "execute_binary", conn.execute)  # PostgreSQL: blobs not hex-encoded on the way
    parts: dict[str, tuple[list[bytes | memoryview], list[bytes | memoryview]]] = {key: ([], []) for key in keys}
    for at in range(0, len(keys), _IN):
        chunk = keys[at:at + _IN]
        picked = [k for k in chunk if k in short]
        # Only the chosen columns leave the database (PostgreSQL reads a blob only when it is selected).
        pick = f"summary_n IS NOT NULL AND key IN ({','.join('?' * len(picked))})" if picked else "0 = 1"
        query = (f"SELECT key, CASE WHEN {pick} THEN summary_{col} ELSE {col} END, CASE WHEN {pick} THEN "
                 f"summary_value ELSE value END, CASE WHEN {pick} THEN summary_n ELSE n END FROM series_chunks "
                 f"WHERE run_key = ? AND name = ? AND key IN ({','.join('?' * len(chunk))}){after_sql} "
                 "ORDER BY key, id")
        for key, x, y, n in execute(query, (*picked, *picked, *picked, run_key, name, *chunk, *after_params)):
            xs, ys = parts[key]
            xs.append(unpacked(x, n))
            ys.append(unpacked(y, n))
    for key in keys:
        if key in tail:
            parts[key][0].append(tail[key][0].tobytes())
            parts[key][1].append(tail[key][1].tobytes())
    out = []
    for key, (xs, ys) in parts.items():
        x = np.frombuffer(b"".join(xs), dtype=np.float64)
        y = np.frombuffer(b"".join(ys), dtype=np.float64)
        keep = ~np.isnan(x) if after is None else x > after  # NaN > after is False: no round, no place
        if not keep.all():
            x, y = x[keep], y[keep]
        out.append(SeriesData(key, x, y, sizes[key]))
    return out


@in_snapshot
def read_markers(conn: Conn, run_key: int, axis: str, after: float | None, limit: int) -> list[Marker]:
    """A run's markers in stored order, those with x above ``after`` on ``axis`` (at most ``limit``)."""
    col = AXIS_COLUMNS[axis]
    query = "SELECT body FROM series_markers WHERE run_key = ?"
    params: list[object] = [run_key]
    if after is not None:
        query += f" AND {col} > ?"
        params.append(after)
    rows = conn.execute(query + " ORDER BY event_id LIMIT ?", (*params, limit)).fetchall()
    out = [_markers.decode(bytes(row[0])) for row in rows]
    if len(out) < limit:
        for _, _, marker in _tail(conn, run_key).markers:
            x = (marker.epoch or 0) if axis == "epoch" else getattr(marker, axis)  # as the table keeps it
            if after is None or (x is not None and x > after):
                out.append(marker)
    return out[:limit]
