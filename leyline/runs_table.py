"""What a runs table shows of a page of runs by default, decided once for every table: the metric columns (the
series every run of the page that has any has: a loop's own metrics of rank 0, its summaries among them), the config
keys that tell the runs apart (``charts.differing_params``), and each series' name in the filter language. A metric
column is a series by that name (what it is titled and sorted by: ``val_loss.best``), one column for runs of one rank
and of several: ``val_loss`` shows rank 0's (``metric_of``, by ``leyline.run_keys.run_key``, the rule a query reads
it by); ``val_loss{rank=1}`` is a column of its own. The server serves it with the page (``GET /runs-table``: the web
page renders what it is given); the console calls ``table_columns`` on the page it reads.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import msgspec

from leyline import charts
from leyline.query import short_key
from leyline.run_keys import run_key
from leyline.runs import RunSummary
from leyline.series import internal, kind_of_name, parse_key
from leyline.summaries import MetricSummary

MAX_METRIC_COLUMNS = 6
"""Metric columns shown by default at most."""
OWN, HIDDEN = 0, 1
"""How a series ranks for the default columns: a loop's own metric of rank 0 (``run.log``, or set outright with
``run.summary``: an Esper run's final accuracy, seeds fossilized …), or not shown by default (the run's machinery,
``leyline.series.internal``: ``system.*``, ``hub_health.*`` …; the measures of other kinds; other ranks: picked by
hand)."""


def default_rank(key: str) -> int:
    """``OWN`` or ``HIDDEN``: how the series ``key`` ranks for the default columns."""
    try:
        name, labels = parse_key(key)
    except ValueError:
        return HIDDEN
    if labels.get("rank", "0") != "0":
        return HIDDEN
    return OWN if kind_of_name(name) == "metrics" and not internal(key) else HIDDEN


def metric_of(run: RunSummary, column: str) -> MetricSummary | None:
    """What the metric column ``column`` (a series by its name in the filter language, ``short_key``) shows of
    ``run``: its summary of that series (``val_loss``: rank 0's, ``val_loss{rank=0}`` in a run of several ranks)."""
    return run.metrics.get(run_key(column, run.world_size))


def shared_metrics(runs: Sequence[RunSummary], limit: int | None = MAX_METRIC_COLUMNS) -> list[str]:
    """The metric columns (series by name in the filter language: one for rank 0's, whatever a run's ranks) every
    run of the page that has any of the best rank has (``default_rank``); if they share none, those most runs
    have."""
    ranks = {short_key(k): default_rank(k) for r in runs for k in r.metrics}
    best = min((v for v in ranks.values() if v < HIDDEN), default=None)
    if best is None:
        return []
    owned = [{c for c in map(short_key, r.metrics) if ranks[c] == best} for r in runs]
    counts = Counter(c for columns in owned for c in columns)
    having = sum(1 for columns in owned if columns)
    shared = sorted(k for k, n in counts.items() if n == having)
    if not shared:
        shared = sorted(counts, key=lambda k: (-counts[k], k))
    return shared[:limit]


def differing_params(runs: Sequence[RunSummary], limit: int | None = charts.PARAM_COLUMNS) -> list[str]:
    """Config keys whose values are not the same in every run (``charts.differing_params``)."""
    return charts.differing_params([r.config for r in runs], limit)


class TableColumns(msgspec.Struct, kw_only=True):
    """What a runs table shows of a page by default, and how it names the page's series."""

    metrics: list[str]
    """The metric columns shown, in order, each a series by its name in the filter language: those asked for
    (``val_loss{rank=0}`` named ``val_loss``), else those the runs share (``shared_metrics``)."""
    params: list[str]
    """Config keys shown as columns, in order (``differing_params``)."""
    names: dict[str, str]
    """Every series key of the page's runs, by key order, and its name in the filter language: the column that
    shows it (``val_loss`` of a run of one rank and ``val_loss{rank=0}`` of a run of several are both ``val_loss``;
    ``metric_of`` reads the same back)."""


def table_columns(runs: Sequence[RunSummary], asked: Sequence[str] = ()) -> TableColumns:
    """The columns of a page of runs: the metric columns ``asked`` (series keys or names, as an older link wrote
    them) by name, else the default ones."""
    metrics = list(dict.fromkeys(map(short_key, asked))) or shared_metrics(runs)
    return TableColumns(metrics=metrics, params=differing_params(runs),
                        names={k: short_key(k) for k in sorted({k for r in runs for k in r.metrics})})


class RunsTable(msgspec.Struct, kw_only=True):
    """``GET /runs-table``: a page of runs as ``GET /runs`` lists it, how many match in all, and its columns."""

    runs: list[RunSummary]
    total: int
    """Runs matching the filter in all (the page holds at most ``limit`` of them)."""
    columns: TableColumns
