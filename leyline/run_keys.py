"""A run's series keys as the run shows them: ``rank=N`` only in a run of several ranks.

A series is stored under the key its events give it, the rank among its labels (``val_loss{rank=0}``), whatever
the run's world size and whatever version stored it. Where series and summaries are read (a run's ``metrics``,
its series listed and charted, ``nissa.Api``, the console's live points), a run of one rank shows its series as
its loop named them: ``val_loss``, ``acc{env=0}``; a run of several keeps each rank's (``val_loss{rank=1}``).
The other way, a key without a rank (a query's ``val_loss.best``, a series asked for by key) is rank 0's.
"""

from __future__ import annotations

from typing import TypeVar

import msgspec

from leyline.series import SeriesPoint, format_key, parse_key

V = TypeVar("V")


def shown_labels(labels: dict[str, str], world_size: int) -> dict[str, str]:
    """A series' labels as its run shows them: without ``rank=0`` in a run of one rank."""
    if world_size > 1 or labels.get("rank") != "0":
        return labels
    return {k: v for k, v in labels.items() if k != "rank"}


def shown_key(key: str, world_size: int) -> str:
    """A stored series key as its run shows it (``shown_labels``): ``val_loss{rank=0}`` → ``val_loss`` in a run of
    one rank."""
    if world_size > 1 or "rank=0" not in key:
        return key
    try:
        name, labels = parse_key(key)
    except ValueError:
        return key
    return format_key(name, shown_labels(labels, world_size))


def shown_metrics(metrics: dict[str, V], world_size: int) -> dict[str, V]:
    """A run's summaries (or anything by series key) under the keys the run shows."""
    if world_size > 1:
        return metrics
    return {shown_key(k, world_size): v for k, v in metrics.items()}


def shown_point(point: SeriesPoint, world_size: int) -> SeriesPoint:
    """A point (``leyline.series.points_of``) under the key its run shows."""
    labels = shown_labels(point.labels, world_size)
    if labels is point.labels:
        return point
    return msgspec.structs.replace(point, labels=labels, key=format_key(point.name, labels))


def stored_labels(labels: dict[str, str]) -> dict[str, str]:
    """Labels as a run shows them or a query writes them, as stored: no ``rank`` is rank 0's."""
    return labels if "rank" in labels else {**labels, "rank": "0"}


def stored_key(key: str) -> str:
    """A series key as a run shows it or a query writes it, as stored (``stored_labels``): ``val_loss`` →
    ``val_loss{rank=0}``, ``lr.min{}`` (a query's ``lr.min``) → ``lr.min{rank=0}``; a key that does not parse is
    left as it is."""
    try:
        name, labels = parse_key(key.removesuffix("{}"))
    except ValueError:
        return key
    return format_key(name, stored_labels(labels))


def run_key(key: str, world_size: int) -> str:
    """The key a run of ``world_size`` ranks shows the series ``key`` under, however ``key`` is written (as a query
    or a runs table's column names it, or as a run of either kind shows it; no rank is rank 0's): ``val_loss`` and
    ``val_loss{rank=0}`` are ``val_loss`` in a run of one rank and ``val_loss{rank=0}`` in a run of several;
    ``val_loss{rank=1}`` is itself."""
    return shown_key(stored_key(key), world_size)
