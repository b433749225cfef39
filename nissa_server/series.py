"""Series for display: a series' points downsampled keeping the extremes, for one run or several."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence

import msgspec
import numpy as np
from tsdownsample import MinMaxDownsampler, NaNMinMaxDownsampler

from leyline.series import parse_key, parse_label_pairs
from nissa_server.store.series_queries import SeriesData

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


def has_labels(labels: dict[str, str]) -> Callable[[str], bool]:
    """Whether a series key has all of ``labels``."""
    return lambda key: all(parse_key(key)[1].get(k) == v for k, v in labels.items())


def shape(run_id: str, data: Sequence[SeriesData], max_points: int) -> list[SeriesOut]:
    """The series of one run (as read: chosen by their labels with ``has_labels``), downsampled."""
    out = []
    for series in data:
        own = parse_key(series.key)[1]
        x, y = downsample(series.x, series.y, max_points)
        out.append(SeriesOut(run_id=run_id, key=series.key, labels=own, x=x.tolist(), y=y.tolist(),
                             points=series.stored or len(series.x)))
    return out


def parse_labels(text: str | None) -> dict[str, str]:
    """``env=2,rank=0`` → ``{"env": "2", "rank": "0"}`` (``\\`` escapes ``,`` ``=`` and ``\\`` in a name or
    value, as in a series key); raises ``ValueError`` with the reason."""
    return parse_label_pairs(text or "")


def to_csv(reply: SeriesReply) -> str:
    """``run_id,key,x,y`` rows (y empty where it is NaN or infinite)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["run_id", "key", "x", "y"])
    for s in reply.series:
        for x, y in zip(s.x, s.y):
            writer.writerow([s.run_id, s.key, repr(x), repr(y) if np.isfinite(y) else ""])
    return buf.getvalue()
