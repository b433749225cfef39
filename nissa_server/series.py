"""Series for display: a series' points downsampled keeping the extremes, for one run or several."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import msgspec
import numpy as np
from tsdownsample import MinMaxDownsampler, NaNMinMaxDownsampler

from leyline.run_keys import shown_labels, stored_key
from leyline.series import format_key, kind_of_name, parse_key, parse_label_pairs
from leyline.text import csv_row
from nissa_server.store import ranks_sql, series_queries
from nissa_server.store.conn import Conn
from nissa_server.store.series_queries import SeriesData

_encoder = msgspec.json.Encoder()
_minmax = MinMaxDownsampler()
_nan_minmax = NaNMinMaxDownsampler()


class SeriesInfo(msgspec.Struct):
    """One series of a run, as ``GET /runs/{id}/series`` lists it."""

    key: str
    name: str
    labels: dict[str, str]
    points: int
    kind: str
    """The event kind it comes from; ``metrics`` for a loop's own values (``run.log``)."""


class SeriesOut(msgspec.Struct):
    """One series of one run, as the API returns it (``y`` null where a value is NaN or infinite)."""

    run_id: str
    key: str
    labels: dict[str, str]
    x: list[float]
    y: list[float]
    points: int
    """Points stored for it (in the stored rows with points after ``after``), before downsampling."""


class SeriesReply(msgspec.Struct):
    name: str
    x: str
    series: list[SeriesOut]


def downsample(x: np.ndarray, y: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    """At most ``max_points`` points, in x order, that keep each bucket's minimum and maximum (x split
    into ``max_points / 2`` equal buckets): a spike never disappears from a chart however long the run."""
    if len(x) > 1 and not bool(np.all(x[1:] >= x[:-1])):  # a resumed run went back in step: its x order
        order = np.argsort(x, kind="stable")
        x, y = x[order], y[order]
    if len(x) <= max_points:
        return x, y
    n_out = max_points - max_points % 2
    at = _bucket_scale(x, n_out // 2)
    if at is None:  # every x the same: one bucket
        order = np.lexsort((y,))  # NaN sorts above every number: a bucket with one shows it
        idx = np.unique(order[[0, -1]])
    elif not np.isfinite(y).all():
        # NaN: the NaN-aware variant (a bucket with a NaN shows it); an infinity counts as an extreme.
        y_for = np.where(np.isinf(y), np.sign(y) * np.finfo(np.float64).max, y)
        idx = _nan_minmax.downsample(at, y_for, n_out=n_out)
    else:
        idx = _minmax.downsample(at, y, n_out=n_out)
    idx = np.asarray(idx, dtype=np.int64)
    return x[idx], y[idx]


def _bucket_scale(x: np.ndarray, buckets: int) -> np.ndarray | None:
    """``x`` (sorted) mapped onto 0..``buckets``, in order, the last exactly ``buckets``; None if every x is
    the same. tsdownsample splits the raw x at ``x[0] + i * width``: it panics on one x (a loop that logs at
    one step, a chart by epoch in epoch 0) or a width that underflows, and drops the points past an edge that
    rounding put below the last x (2003 steps of 16: the newest point, spike or not, was not drawn); on
    0..buckets each edge is an integer."""
    half_span = x[-1] / 2 - x[0] / 2  # halves: the span of two huge x of either sign overflows
    if not half_span > 0:
        return None
    return (x / 2 - x[0] / 2) / half_span * buckets


def shape(run_id: str, data: Sequence[SeriesData], max_points: int, world_size: int) -> list[SeriesOut]:
    """The series of one run (as read), downsampled, under the keys the run shows (``leyline.run_keys``: the rank
    only in a run of several)."""
    out = []
    for series in data:
        key, labels = _shown(series.key, world_size)
        x, y = downsample(series.x, series.y, max_points)
        out.append(SeriesOut(run_id=run_id, key=key, labels=labels, x=x.tolist(), y=y.tolist(),
                             points=series.stored or len(series.x)))
    return out


def _shown(key: str, world_size: int) -> tuple[str, dict[str, str]]:
    """A stored key as its run shows it, and its labels (``leyline.run_keys.shown_labels``)."""
    name, stored = parse_key(key)
    labels = shown_labels(stored, world_size)
    return (key if labels is stored else format_key(name, labels)), labels


def parse_labels(text: str | None) -> dict[str, str]:
    """``env=2,rank=0`` → ``{"env": "2", "rank": "0"}`` (``\\`` escapes ``,`` ``=`` and ``\\`` in a name or
    value, as in a series key); raises ``ValueError`` with the reason."""
    return parse_label_pairs(text or "")


CSV_HEADER = "run_id,key,x,y\n"


def csv_rows(series: Sequence[SeriesOut]) -> str:
    """``run_id,key,x,y`` rows (y empty where it is NaN or infinite), after ``CSV_HEADER``."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    for s in series:
        for x, y in zip(s.x, s.y, strict=True):
            writer.writerow(csv_row([s.run_id, s.key, repr(x), repr(y) if np.isfinite(y) else ""]))
    return buf.getvalue()


def reply_cost(fmt: str, run_id: str) -> Callable[[str, int], int]:
    """The most bytes a series of ``run_id`` with this key and this many points takes in a reply: each float
    24 characters at most, a CSV row repeating the run id and the (quoted) key."""
    if fmt == "csv":
        return lambda key, points: points * (len(run_id) + 2 * len(key) + 56)
    return lambda key, points: len(run_id) + 4 * len(key) + 128 + points * 50


@dataclass
class Page:
    """What one run gives a reply: its series encoded, and where the next page starts if they do not all fit."""

    parts: list[bytes]
    more: bool
    last_key: str | None
    """The key of the last series here (None: none)."""
    spent: int


def read_page(conn: Conn, run_id: str, run_key: int, name: str, axis: str, after: float | None, max_points: int,
              labels: dict[str, str], max_series: int, after_key: str | None, budget: int, fmt: str,
              first: bool) -> Page:
    """On a reader thread: the series of one run that fit in ``budget`` bytes, read, downsampled and encoded
    (the event loop only sends them)."""
    after_key = None if after_key is None else stored_key(after_key)
    page = series_queries.read_series(conn, run_key, name, axis, after, max_points, labels or None, max_series,
                                      after_key, budget, reply_cost(fmt, run_id), first)
    shaped = shape(run_id, page.series, max_points, ranks_sql.world_size(conn, run_key))
    parts = [_encoder.encode(s) for s in shaped] if fmt == "json" else [csv_rows(shaped).encode()]
    return Page(parts, page.more, page.series[-1].key if page.series else after_key, page.spent)


def listing(conn: Conn, run_key: int, after: str | None, limit: int) -> tuple[bytes, str | None, bool]:
    """On a reader thread: a page of the run's series listed (``GET /runs/{id}/series``), encoded; the last key, and
    whether the page is full (more may follow)."""
    rows = series_queries.list_series(conn, run_key, None if after is None else stored_key(after), limit)
    world = ranks_sql.world_size(conn, run_key)
    infos = [SeriesInfo(key=shown, name=name, labels=labels, points=points, kind=kind_of_name(name))
             for key, name, points in rows for shown, labels in (_shown(key, world),)]
    return _encoder.encode(infos), rows[-1][0] if rows else None, len(rows) == limit


def json_body(name: str, axis: str, parts: list[bytes]) -> bytes:
    """A ``SeriesReply`` of series encoded one at a time."""
    return b"".join([b'{"name":', _encoder.encode(name), b',"x":', _encoder.encode(axis), b',"series":[',
                     b",".join(parts), b"]}"])
