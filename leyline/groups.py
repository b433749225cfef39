"""Runs side by side, as the server computes them for every runs table (the console's and the web page's):
rows of a group, a group's band on a chart, the diff of several runs' configs."""

from __future__ import annotations

import msgspec

from leyline.payloads import Scalar


class MetricStats(msgspec.Struct, kw_only=True):
    """One metric column over the runs of a group that have it."""

    n: int
    """Runs of the group with a finite value."""
    mean: float | None = None
    sd: float | None = None
    """Sample standard deviation (n - 1); null with fewer than two values."""
    min: float | None = None
    max: float | None = None


class GroupRow(msgspec.Struct, kw_only=True):
    """The runs that share one value of the grouping key, summarised."""

    value: Scalar
    """The group's value of the key (null: runs without it)."""
    count: int
    """Runs in the group."""
    run_ids: list[str]
    """The group's runs, newest first (the first ``MAX_GROUP_RUNS`` of them)."""
    metrics: dict[str, MetricStats]
    """Each metric column asked for (``val_loss.best``), over the group's runs."""
    filter: str | None = None
    """The clause that picks the group's runs (``config.lr=0.01``, ``group:"a b"``: ``leyline.query.term``); null
    for runs without the key, which no clause names."""


class GroupsReply(msgspec.Struct, kw_only=True):
    """``GET /run-groups``: the runs that match a filter, grouped by one key."""

    by: str
    """``group``, ``project`` or ``config.KEY``."""
    runs: int
    """Runs that match the filter (every one is in a group)."""
    groups: list[GroupRow]


class Band(msgspec.Struct, kw_only=True):
    """One series (one label set) over a group's runs: at each x, the mean of the runs' values and their
    range, with how many runs had a point there."""

    key: str
    labels: dict[str, str]
    x: list[float]
    mean: list[float]
    min: list[float]
    max: list[float]
    n: list[int]


class BandsReply(msgspec.Struct, kw_only=True):
    """``GET /run-groups/series/{name}``: a series' band over the runs named."""

    name: str
    x: str
    runs: list[str]
    bands: list[Band]


class DiffRow(msgspec.Struct, kw_only=True):
    """A config key whose value is not the same in every run: its value in each, as JSON text (null: the
    run has no such key)."""

    key: str
    values: list[str | None]


class ConfigDiff(msgspec.Struct, kw_only=True):
    """``GET /config-diff``: the config keys that differ between runs, in the order the runs were named."""

    runs: list[str]
    names: list[str]
    rows: list[DiffRow]
    same: int
    """Keys every run has with one value."""
