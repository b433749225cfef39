"""What the runs table shows: its columns (who a run is, what it achieved, the config values that tell
the runs apart: which ones, ``leyline.runs_table`` decides for every table), the rows of groups. Pure logic over
a page of ``RunSummary`` as ``GET /runs`` gives it; the server sorts and filters (``sort=``, ``q=``), so a column
names the key the server sorts it by.

Run-written text (names, projects, groups, tags, config values) becomes ``rich.text.Text``, never markup.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.text import Text

from leyline.groups import GroupRow, MetricStats
from leyline.query import short_key
from leyline.runs import RunSummary
from leyline.runs_table import metric_of
from leyline.series import parse_key
from tui.format import clock
from tui.safe_text import run_text

STATUS_STYLE = {"live": "bold green", "degraded": "bold yellow", "lost": "bold red", "failed": "red",
                "interrupted": "yellow", "stopped": "yellow", "finished": "blue"}
RUNNING = ("live", "degraded")
FIELDS = ("best", "last")
"""What a metric column shows of its summary (``b`` in the table switches)."""


def series_name(column_key: str) -> str:
    """The series a metric column reads (``acc{env=2}.best`` → ``acc``): what its chart draws."""
    head = column_key.rpartition(".")[0].removesuffix("{}")
    try:
        return parse_key(head)[0]
    except ValueError:
        return head


def metric_value(run: RunSummary, column: str, field: str) -> float | None:
    """The summary ``field`` the metric column ``column`` shows of ``run`` (``leyline.runs_table.metric_of``)."""
    summary = metric_of(run, column)
    return None if summary is None else getattr(summary, field)


def duration_s(run: RunSummary, now: float | None = None) -> float | None:
    if run.duration_s is not None:
        return run.duration_s
    start, end = run.started_at, run.ended_at
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
        Column("started", "started", lambda r: run_text(fmt_when(r.started_at))),
        Column("duration", "duration", lambda r: run_text(fmt_duration(duration_s(r))), sortable=False),
    ]


def clip(text: str, width: int) -> str:
    """``text`` in ``width`` characters: its start, an ellipsis where it was cut (a header's head tells
    columns apart: ``best_val_loss_seen.b…``, never ``est_val_loss_seen.best``)."""
    return text if len(text) <= width else text[:width - 1] + "…"


def metric_column(key: str, field: str) -> Column:
    """The summary ``field`` of the series ``key`` (a column's name in the filter language, ``val_loss``: rank 0's
    in a run of several ranks too; or a series key), by that name (``val_loss.best``)."""
    sort = f"{short_key(key)}.{field}"
    return Column(clip(sort, 24), sort, lambda r: run_text(fmt_value(metric_value(r, key, field)), justify="right"),
                  lambda g: run_text(fmt_stats(g.metrics.get(sort)), justify="right"))


def param_column(key: str) -> Column:
    return Column(clip(key.rsplit(".", 1)[-1], 14), f"config.{key}", lambda r: _text(r.config.get(key)))


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
