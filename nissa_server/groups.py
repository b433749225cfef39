"""Runs side by side, computed once for every viewer: a group's row (count, mean ± SD of each metric), a
group's band on a chart (mean, min and max over its runs at each x), the diff of several configs.

Pure functions over plain values; the routes in ``routes/groups.py`` feed them what the store holds.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import msgspec

from leyline import query
from leyline.groups import Band, ConfigDiff, DiffRow, GroupRow, MetricStats
from leyline.payloads import Scalar

MAX_GROUP_RUNS = 200
"""Run ids a group row names (its count says how many it has)."""


@dataclass(frozen=True)
class Member:
    """A run as grouping sees it: its value of the key and of each metric column."""

    run_id: str
    value: Scalar
    metrics: dict[str, float | None]


def _finite(values: Iterable[float | None]) -> list[float]:
    return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]


def stats(values: Iterable[float | None]) -> MetricStats:
    """Mean, sample SD, min and max of the finite values (unknowns, NaN and infinities left out)."""
    xs = _finite(values)
    if not xs:
        return MetricStats(n=0)
    sd = statistics.stdev(xs) if len(xs) > 1 else None
    return MetricStats(n=len(xs), mean=statistics.fmean(xs), sd=sd, min=min(xs), max=max(xs))


def _order(value: Scalar) -> tuple:
    """Groups in the order of their value: numbers by number, then text, runs without the key last."""
    if value is None:
        return (2, 0.0, "")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, str(value))


def group_rows(by: str, members: Iterable[Member], metrics: Sequence[str]) -> list[GroupRow]:
    """One row per value of the key ``by``, the members kept in the order given (newest first from the store)."""
    by_value: dict[str, tuple[Scalar, list[Member]]] = {}
    for m in members:
        # 1 and 1.0 and True are one dict key in Python; as JSON text they are told apart.
        by_value.setdefault(msgspec.json.encode(m.value).decode(), (m.value, []))[1].append(m)
    rows = [GroupRow(value=value, count=len(runs), run_ids=[m.run_id for m in runs[:MAX_GROUP_RUNS]],
                     metrics={k: stats(m.metrics.get(k) for m in runs) for k in metrics},
                     filter=None if value is None else query.term(by, value))
            for value, runs in by_value.values()]
    return sorted(rows, key=lambda r: _order(r.value))


def band(key: str, labels: dict[str, str], lines: Sequence[tuple[Sequence[float], Sequence[float | None]]],
         max_points: int) -> Band:
    """The mean and range over runs of one series: each run's ``(x, y)`` line is cut into buckets of x (each
    distinct x its own bucket while there are at most ``max_points`` of them, else equal widths), a run's value
    in a bucket is the mean of its points there, and the band at that bucket is the mean, min and max of the
    runs' values, at the mean of their x."""
    xs = sorted({float(x) for line_x, _ in lines for x in line_x})
    if not xs:
        return Band(key=key, labels=labels, x=[], mean=[], min=[], max=[], n=[])
    if len(xs) <= max_points:
        index = {x: i for i, x in enumerate(xs)}
        bucket_of = index.__getitem__
        buckets = len(xs)
    else:
        lo, width = xs[0], (xs[-1] - xs[0]) / max_points
        buckets = max_points

        def bucket_of(x: float) -> int:
            return min(int((x - lo) / width), buckets - 1)

    per_bucket: list[list[tuple[float, float]]] = [[] for _ in range(buckets)]  # (x, y) of each run there
    for line_x, line_y in lines:
        sums: dict[int, list[float]] = {}
        for x, y in zip(line_x, line_y, strict=True):
            if y is None or not math.isfinite(y):
                continue
            acc = sums.setdefault(bucket_of(float(x)), [0.0, 0.0, 0.0])
            acc[0] += float(x)
            acc[1] += float(y)
            acc[2] += 1
        for b, (sx, sy, n) in sums.items():
            per_bucket[b].append((sx / n, sy / n))
    out = Band(key=key, labels=labels, x=[], mean=[], min=[], max=[], n=[])
    for runs in per_bucket:
        if runs:
            ys = [y for _, y in runs]
            out.x.append(statistics.fmean(x for x, _ in runs))
            out.mean.append(statistics.fmean(ys))
            out.min.append(min(ys))
            out.max.append(max(ys))
            out.n.append(len(runs))
    return out


def config_diff(run_ids: Sequence[str], names: Sequence[str], configs: Sequence[dict[str, Scalar]]) -> ConfigDiff:
    """The keys whose values are not the same in every config (or that some lack), sorted."""
    rows, same = [], 0
    for key in sorted({k for c in configs for k in c}):
        texts = [msgspec.json.encode(c[key]).decode() if key in c else None for c in configs]
        if None not in texts and len(set(texts)) == 1:
            same += 1
        else:
            rows.append(DiffRow(key=key, values=texts))
    return ConfigDiff(runs=list(run_ids), names=list(names), rows=rows, same=same)
