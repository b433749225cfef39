"""What the runs table shows: columns, the config values that tell runs apart, sorting and filtering.

Pure logic over ``RunSummary``, read from the paged summaries of ``GET /runs`` (``started``,
``duration_s``, ``summary``, ``params``) or from the older full items (``started_at``, ``ended_at``,
``config``), whichever the server sends.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from leyline.payloads import Scalar

from tui.client import RunSummary
from tui.format import clock

STATUS_ORDER = {"live": 0, "degraded": 1, "lost": 2, "failed": 3, "interrupted": 4, "stopped": 5, "finished": 6}
STATUS_STYLE = {"live": "bold green", "degraded": "bold yellow", "lost": "bold red", "failed": "red",
                "interrupted": "yellow", "stopped": "yellow", "finished": "blue"}
RUNNING = ("live", "degraded")
MAX_PARAM_COLUMNS = 6
HIDDEN_PARAMS = ("run_name", "log_dir", "server", "token", "seed_base", "resume")
OWN_COLUMN_PARAMS = frozenset({"policy"})
"""Config values with a column of their own (the policy a run had): never a second one."""


def params_of(run: RunSummary) -> dict[str, Scalar]:
    return run.params if run.params is not None else (run.config or {})


def differing_params(runs: list[RunSummary], limit: int = MAX_PARAM_COLUMNS) -> list[str]:
    """Config keys whose values are not the same in every run: first those the runs that have them set
    differently, then those some runs lack (an Esper run's options beside a plain loop's run)."""
    if len(runs) < 2:
        return []
    keys = sorted({k for r in runs for k in params_of(r)})
    valued, absent = [], []
    for key in keys:
        if key in OWN_COLUMN_PARAMS or any(key.endswith(h) for h in HIDDEN_PARAMS):
            continue
        values = {repr(params_of(r)[key]) for r in runs if key in params_of(r)}
        if len(values) > 1:
            valued.append(key)
        elif any(key not in params_of(r) for r in runs):
            absent.append(key)
    return (valued + absent)[:limit]


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


def fmt_value(value: object) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)[:24]


def _total(run: RunSummary, field: str) -> Any:
    return getattr(run.summary, field) if run.summary is not None else None


@dataclass(frozen=True)
class Column:
    label: str
    key: str
    value: Callable[[RunSummary], Any]
    """What the column sorts by."""
    text: Callable[[RunSummary], str]
    """What the column shows."""


def _sortable(value: Any) -> tuple:
    """Unknowns sort last, numbers by value, anything else by its text."""
    if value is None:
        return (2, 0.0, "")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, str(value))


def columns(param_keys: list[str]) -> list[Column]:
    fixed = [
        Column("status", "status", lambda r: STATUS_ORDER.get(r.status, len(STATUS_ORDER)), lambda r: r.status),
        Column("name", "name", lambda r: r.name, lambda r: r.name or "—"),
        Column("run", "run_id", lambda r: r.run_id, lambda r: r.run_id),
        Column("started", "started", lambda r: r.start_ts, lambda r: fmt_when(r.start_ts)),
        Column("duration", "duration", duration_s, lambda r: fmt_duration(duration_s(r))),
    ]
    params = [Column(k.rsplit(".", 1)[-1][:14], f"param:{k}", lambda r, k=k: params_of(r).get(k),
                     lambda r, k=k: fmt_value(params_of(r).get(k))) for k in param_keys]
    totals = [
        Column("final acc", "final_accuracy", lambda r: _total(r, "final_accuracy"),
               lambda r: fmt_value(_total(r, "final_accuracy"))),
        Column("best acc", "best_accuracy", lambda r: _total(r, "best_accuracy"),
               lambda r: fmt_value(_total(r, "best_accuracy"))),
        Column("fossil", "fossilized", lambda r: _total(r, "fossilized"), lambda r: fmt_value(_total(r, "fossilized"))),
        Column("rounds", "rounds", lambda r: _total(r, "rounds"), lambda r: fmt_value(_total(r, "rounds"))),
        Column("policy", "policy", lambda r: _total(r, "policy") or params_of(r).get("policy"),
               lambda r: fmt_value(_total(r, "policy") or params_of(r).get("policy"))),
    ]
    return fixed + params + totals


def sort_runs(runs: list[RunSummary], column: Column, reverse: bool) -> list[RunSummary]:
    """Sorted by ``column``, unknown values last either way, ties newest first."""
    by_start = sorted(runs, key=lambda r: (r.start_ts or 0.0, r.run_id), reverse=True)
    known = [r for r in by_start if column.value(r) is not None]
    unknown = [r for r in by_start if column.value(r) is None]
    return sorted(known, key=lambda r: _sortable(column.value(r)), reverse=reverse) + unknown


def matches(run: RunSummary, text: str) -> bool:
    """Every word of ``text`` is in the run's name, id or status, or is ``key=value`` of its config."""
    haystack = f"{run.name} {run.run_id} {run.status}".lower()
    params = params_of(run)
    for word in text.lower().split():
        if "=" in word:
            key, _, want = word.partition("=")
            if not any(k.lower().endswith(key) and str(v).lower() == want for k, v in params.items()):
                return False
        elif word not in haystack:
            return False
    return True


def config_diff(a: dict[str, Scalar], b: dict[str, Scalar]) -> tuple[list[tuple[str, str, str]], int]:
    """Rows ``(key, value in a, value in b)`` where they differ (``—``: absent), and how many are equal."""
    rows, same = [], 0
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key), b.get(key)
        if key in a and key in b and va == vb:
            same += 1
        else:
            rows.append((key, "—" if key not in a else repr(va), "—" if key not in b else repr(vb)))
    return rows, same
