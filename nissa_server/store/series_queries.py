"""Reads of series and markers (see ``series_sql``): the listing, one name's points on one x axis, markers.

Each read sees one commit (``Conn.snapshot``): the rows charted up to the watermark, and the points of
the run's events after it gathered as it reads (``series_pass`` charts them about a second later), so
what a read returns is every committed event's, neither missed nor counted twice."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

import msgspec
import numpy as np

from leyline.series import X_AXES, Marker
from nissa_server.store.conn import Conn
from nissa_server.store.series_gather import Charted, chart
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


def in_snapshot(fn: Callable[P, T]) -> Callable[P, T]:
    """``fn(conn, …)`` inside a read transaction that sees one commit."""
    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        conn: Conn = args[0]  # type: ignore[assignment]
        conn.execute(conn.snapshot)
        try:
            return fn(*args, **kwargs)
        finally:
            conn.execute("COMMIT")
    return wrapper


def _tail(conn: Conn, run_key: int) -> Charted:
    """The points and markers of the run's events past the watermark (not charted yet)."""
    rows = conn.execute("SELECT id, body FROM event_blocks WHERE run_key = ? AND id > ? ORDER BY id",
                        (run_key, watermark(conn))).fetchall()
    return chart((run_key, int(first_id), bytes(body)) for first_id, body in rows)


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


class TooManySeries(ValueError):
    """More series of one name (label sets) than one reply holds."""


@in_snapshot
def read_series(conn: Conn, run_key: int, name: str, axis: str, after: float | None,
                max_points: int | None = None, keep_key: Callable[[str], bool] | None = None,
                max_series: int | None = None) -> list[SeriesData]:
    """Every series called ``name`` of a run (those whose key ``keep_key`` keeps): its points on ``axis``, only
    those with x above ``after``; ``TooManySeries`` if they are more than ``max_series``.

    For a chart of at most ``max_points`` points of a series many times longer, the rows' summaries are
    read where they have one (each block's extremes: what a min/max downsampling keeps anyway)."""
    col = AXIS_COLUMNS[axis]
    where, params = "run_key = ? AND name = ?", (run_key, name)
    if after is not None:
        where += f" AND {col}_max > ?"
        params += (after,)
    sizes: dict[str, int] = {}
    for key, n in conn.execute(f"SELECT key, n FROM series_chunks WHERE {where}", params):
        sizes[key] = sizes.get(key, 0) + n
    at = X_AXES.index(axis)
    tail = {key: (arrays[at], arrays[4]) for (_, key), (own, arrays) in _tail(conn, run_key).series.items()
            if own == name and (keep_key is None or keep_key(key))}
    for key, (x, _) in tail.items():
        sizes[key] = sizes.get(key, 0) + len(x)
    if keep_key is not None:
        sizes = {k: n for k, n in sizes.items() if keep_key(k)}
        where += f" AND key IN ({','.join('?' * len(sizes)) or 'NULL'})"
        params += tuple(sizes)
    if max_series is not None and len(sizes) > max_series:
        raise TooManySeries(f"{len(sizes)} series are called {name!r} (label sets), more than the {max_series} "
                            "one reply holds: choose some with labels=")
    short = {k for k, n in sizes.items() if max_points is not None and after is None and n > SUMMARY_USE * max_points}
    execute = getattr(conn, "execute_binary", conn.execute)  # PostgreSQL: blobs not hex-encoded on the way
    parts: dict[str, tuple[list[bytes], list[bytes]]] = {}
    # Only the chosen columns leave the database (PostgreSQL reads a blob only when it is selected).
    pick = f"summary_n IS NOT NULL AND key IN ({','.join('?' * len(short))})" if short else "0 = 1"
    query = (f"SELECT key, CASE WHEN {pick} THEN summary_{col} ELSE {col} END, CASE WHEN {pick} THEN summary_value "
             f"ELSE value END, CASE WHEN {pick} THEN summary_n ELSE n END FROM series_chunks WHERE {where} "
             "ORDER BY key, id")
    for key, x, y, n in execute(query, (*short, *short, *short, *params)):
        xs, ys = parts.setdefault(key, ([], []))
        xs.append(unpacked(x, n))
        ys.append(unpacked(y, n))
    for key in sorted(tail):
        xs, ys = parts.setdefault(key, ([], []))
        xs.append(tail[key][0].tobytes())
        ys.append(tail[key][1].tobytes())
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
    query, params = "SELECT body FROM series_markers WHERE run_key = ?", [run_key]
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
