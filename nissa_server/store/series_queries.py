"""Reads of series and markers (see ``series_sql``): the listing, one name's points on one x axis, markers."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
import numpy as np

from leyline.series import Marker
from nissa_server.store.conn import Conn

AXIS_COLUMNS = {"step": "step", "epoch": "epoch", "round": "round", "ts": "ts"}
"""x axis → its column (a fixed set: the names go into SQL text)."""
_markers = msgspec.json.Decoder(Marker)


@dataclass
class SeriesData:
    """The points of one series on one x axis, in stored order (points with no place on it left out)."""

    key: str
    x: np.ndarray
    y: np.ndarray


def list_series(conn: Conn, run_key: int) -> list[tuple[str, str, int]]:
    """(key, name, points) of every series of a run, by key."""
    rows = conn.execute("SELECT key, name, SUM(n) FROM series_chunks WHERE run_key = ? GROUP BY key, name "
                        "ORDER BY key", (run_key,)).fetchall()
    return [(row[0], row[1], int(row[2])) for row in rows]


def read_series(conn: Conn, run_key: int, name: str, axis: str, after: float | None) -> list[SeriesData]:
    """Every series called ``name`` of a run: its points on ``axis``, only those with x above ``after``."""
    col = AXIS_COLUMNS[axis]
    query = f"SELECT key, {col}, value FROM series_chunks WHERE run_key = ? AND name = ?"
    params: tuple = (run_key, name)
    if after is not None:
        query += f" AND {col}_max > ?"
        params += (after,)
    parts: dict[str, tuple[list[bytes], list[bytes]]] = {}
    execute = getattr(conn, "execute_binary", conn.execute)  # PostgreSQL: blobs not hex-encoded on the way
    for key, x, y in execute(query + " ORDER BY key, id", params):
        xs, ys = parts.setdefault(key, ([], []))
        xs.append(x)
        ys.append(y)
    out = []
    for key, (xs, ys) in parts.items():
        x = np.frombuffer(b"".join(xs), dtype=np.float64)
        y = np.frombuffer(b"".join(ys), dtype=np.float64)
        keep = ~np.isnan(x) if after is None else x > after  # NaN > after is False: no round, no place
        if not keep.all():
            x, y = x[keep], y[keep]
        out.append(SeriesData(key, x, y))
    return out


def read_markers(conn: Conn, run_key: int, axis: str, after: float | None, limit: int) -> list[Marker]:
    """A run's markers in stored order, those with x above ``after`` on ``axis`` (at most ``limit``)."""
    col = AXIS_COLUMNS[axis]
    query, params = "SELECT body FROM series_markers WHERE run_key = ?", [run_key]
    if after is not None:
        query += f" AND {col} > ?"
        params.append(after)
    rows = conn.execute(query + " ORDER BY event_id LIMIT ?", (*params, limit)).fetchall()
    return [_markers.decode(bytes(row[0])) for row in rows]
