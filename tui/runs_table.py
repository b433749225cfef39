"""What the runs table shows: its columns (who a run is, what it achieved, the config values that tell
the runs apart), the rows of groups. Pure logic over a page of ``RunSummary`` as ``GET /runs`` gives it;
the server sorts and filters (``sort=``, ``q=``), so a column names the key the server sorts it by.

Run-written text (names, projects, groups, tags, config values) becomes ``rich.text.Text``, never markup.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.text import Text

from leyline import charts
from leyline.groups import GroupRow, MetricStats
from leyline.payloads import Scalar
from leyline.series import format_key, kind_of_name, parse_key
from leyline.summaries import STATS
from tui.client import RunSummary
from tui.format import clock
from tui.safe_text import run_text

STATUS_STYLE = {"live": "bold green", "degraded": "bold yellow", "lost": "bold red", "failed": "red",
                "interrupted": "yellow", "stopped": "yellow", "finished": "blue"}
RUNNING = ("live", "degraded")
MAX_PARAM_COLUMNS = charts.PARAM_COLUMNS
MAX_METRIC_COLUMNS = 6
HIDDEN_METRICS = charts.HIDDEN_METRICS
"""Metrics never shown by default (the machine's own: picked by hand when wanted)."""
OUTCOME_METRICS = ("run_finished.final_accuracy", "run_finished.best_accuracy", "run_finished.fossilized",
                   "run_finished.rounds")
"""What an Esper run achieved, shown by default where no run logged metrics of its own."""
FIELDS = ("best", "last")
"""What a metric column shows of its summary (``b`` in the table switches)."""


def params_of(run: RunSummary) -> dict[str, Scalar]:
    return run.params if run.params is not None else (run.config or {})


def differing_params(runs: Sequence[RunSummary], limit: int = MAX_PARAM_COLUMNS) -> list[str]:
    """Config keys whose values are not the same in every run (leyline's rule, the web page's too)."""
    return charts.differing_params([params_of(r) for r in runs], limit)


def metric_name(key: str) -> str:
    """A series key as the filter language names it: rank 0's without its rank (``val_loss{rank=0}`` is
    ``val_loss``), ``{}`` after a name whose last part reads as a statistic (``x.min{}``)."""
    try:
        name, labels = parse_key(key)
    except ValueError:
        return key
    if labels.get("rank") == "0":
        del labels["rank"]
    if not labels and name.rpartition(".")[2] in STATS:
        return name + "{}"
    return format_key(name, labels)


def series_name(column_key: str) -> str:
    """The series a metric column reads (``acc{env=2}.best`` → ``acc``): what its chart draws."""
    head = column_key.rpartition(".")[0].removesuffix("{}")
    try:
        return parse_key(head)[0]
    except ValueError:
        return head


def _default_rank(key: str) -> int:
    """0: a loop's own metric of rank 0 (``run.log``), 1: an Esper outcome, 2: not shown by default (the machine's
    ``system.*``, the fields of other events, other ranks: picked by hand when wanted)."""
    try:
        name, labels = parse_key(key)
    except ValueError:
        return 2
    if labels.get("rank", "0") != "0" or name.startswith(HIDDEN_METRICS):
        return 2
    return 0 if kind_of_name(name) == "metrics" else 1 if name in OUTCOME_METRICS else 2


def shared_metrics(runs: Sequence[RunSummary], limit: int = MAX_METRIC_COLUMNS) -> list[str]:
    """The series keys every run of the page that has any has: a loop's own metrics of rank 0 (``loss``,
    ``val_loss``), else Esper's outcome; if they share none, those most runs have."""
    ranks = {k: _default_rank(k) for r in runs for k in r.metrics}
    best = min((v for v in ranks.values() if v < 2), default=None)
    if best is None:
        return []
    having = [r for r in runs if any(ranks[k] == best for k in r.metrics)]
    counts: dict[str, int] = {}
    for run in having:
        for key in run.metrics:
            if ranks[key] == best:
                counts[key] = counts.get(key, 0) + 1
    shared = sorted(k for k, n in counts.items() if n == len(having))
    if not shared:
        shared = sorted(counts, key=lambda k: (-counts[k], k))
    return shared[:limit]


def metric_value(run: RunSummary, key: str, field: str) -> float | None:
    summary = run.metrics.get(key)
    return None if summary is None else getattr(summary, field)


def duration_s(run: RunSummary, now: float | None = None) -> float | None:
    if run.duration_s is not None:
        return run.duration_s
    start, end = run.start_ts, run.end_ts
    if start is None:
        return None
    if end is None:
        end = time.time() if now is None else now
    return max(end - start, 0.0)


def fmt_duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "—"
    s = int(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def fmt_when(ts: float | None) -> str:
    return "—" if ts is None else clock(ts, "%m-%d %H:%M:%S")


def fmt_value(value: object, width: int = 24) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)[:width]


def fmt_stats(s: MetricStats | None) -> str:
    """``mean ± SD`` of a group's metric (the mean alone for one run)."""
    if s is None or s.mean is None:
        return "—"
    return f"{s.mean:.4g}" if s.sd is None else f"{s.mean:.4g} ± {s.sd:.2g}"


@dataclass(frozen=True)
class Column:
    label: str
    key: str
    """What the server sorts it by (``sort=key``, ``sort=-key``): ``name``, ``val_loss.best``, ``config.lr``."""
    text: Callable[[RunSummary], Text]
    """What the column shows of a run."""
    group_text: Callable[[GroupRow], Text] | None = None
    """What it shows of a group's row (None: nothing)."""
    sortable: bool = True
    """Whether the server sorts by it (``key`` is then a sort key)."""


def _text(value: object, style: str = "") -> Text:
    return run_text(fmt_value(value), style=style, no_wrap=True)


def short_id(run_id: str, width: int = 32) -> str:
    """A run id in ``width`` characters: its end (``<name>-<utc time>-<hex>``: the name has its own column)."""
    return run_id if len(run_id) <= width else "…" + run_id[-(width - 1):]


def _who() -> list[Column]:
    return [
        Column("status", "status", lambda r: run_text(r.status, style=STATUS_STYLE.get(r.status, "")),
               lambda g: run_text(f"{g.count} run{'s' if g.count != 1 else ''}", style="italic")),
        Column("name", "name", lambda r: _text(r.name or r.run_id, "bold"),
               lambda g: run_text(fmt_value(g.value, 40), style="bold")),
        Column("run", "id", lambda r: run_text(short_id(r.run_id), style="dim")),
    ]


def _where() -> list[Column]:
    return [
        Column("project", "project", lambda r: _text(r.project)),
        Column("group", "group", lambda r: _text(r.group)),
        Column("tags", "tag", lambda r: run_text(" ".join(r.tags)[:30] or "—", style="cyan", no_wrap=True)),
        Column("started", "started", lambda r: run_text(fmt_when(r.start_ts))),
        Column("duration", "duration", lambda r: run_text(fmt_duration(duration_s(r))), sortable=False),
    ]


def metric_column(key: str, field: str) -> Column:
    """The summary ``field`` of the series ``key``, by the name the filter language gives it (``val_loss.best``)."""
    sort = f"{metric_name(key)}.{field}"
    return Column(sort[-22:], sort, lambda r: run_text(fmt_value(metric_value(r, key, field)), justify="right"),
                  lambda g: run_text(fmt_stats(g.metrics.get(sort)), justify="right"))


def param_column(key: str) -> Column:
    return Column(key.rsplit(".", 1)[-1][:14], f"config.{key}", lambda r: _text(params_of(r).get(key)))


def columns(metric_keys: Sequence[str], field: str, param_keys: Sequence[str]) -> list[Column]:
    """Who a run is, what it achieved, the config values that tell the runs apart, then where it belongs and
    when it ran (a group's row fills the first ones: its size, its value, its metrics' mean ± SD)."""
    return [*_who(), *(metric_column(k, field) for k in metric_keys), *(param_column(k) for k in param_keys),
            *_where()]


def group_keys(param_keys: Sequence[str]) -> list[str | None]:
    """What ``u`` cycles the table through: runs, then rows by group, by project, by each config key shown."""
    return [None, "group", "project", *(f"config.{k}" for k in param_keys)]


def sort_param(key: str, reverse: bool) -> str:
    return f"-{key}" if reverse else key
