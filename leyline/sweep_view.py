"""What a sweep's page and the console's sweep view show, computed once from a ``SweepInfo``
(``GET /sweeps/{sweep_id}/view``): the trials as rows of text in the sweep's parameter columns, the lineage as rows
(which trial copied which, at which step, what values changed), the exploit marks of each trial's curve, and the
trials' runs in trial order (the curves' colours and the parallel coordinates' lines)."""

from __future__ import annotations

import math

import msgspec

from leyline.sweeps import FINISHED_TRIALS, MetricGoal, SweepInfo, Trial, Value


class TrialRow(msgspec.Struct, kw_only=True):
    """A trial as the table shows it: ``values`` are ``params`` as text, one per column of ``SweepView.columns``."""

    trial_id: int
    run_id: str | None
    status: str
    params: dict[str, Value]
    values: list[str]
    metric: str
    best: str
    best_value: float | None
    """The best metric as a number (the parallel coordinates' last axis)."""
    step: str
    exploits: int
    agent: str
    message: str
    is_best: bool
    stoppable: bool
    """Running or queued: ``stop`` ends it (a running trial through its run's ``stop`` command)."""


class LineageRow(msgspec.Struct, kw_only=True):
    """One exploit: ``trial_id`` copied ``source_trial`` at ``step``; ``change`` says what values it took."""

    trial_id: int
    run_id: str | None
    step: int
    source_trial: int
    source_run_id: str
    change: str
    """``lr 0.05 → 0.0024, momentum 0.9 → 0.5``: every value that differs before and after."""
    status: str
    exploit_ms: str
    message: str


class CurveMark(msgspec.Struct, kw_only=True):
    """An exploit drawn on its trial's curve: a line at ``step`` with ``label`` (``← t2``: the trial copied)."""

    run_id: str
    step: int
    label: str


class Axis(msgspec.Struct, kw_only=True):
    """An axis of the parallel coordinates: a parameter, or the metric (the last); what its ends stand for."""

    name: str
    low: str
    high: str


class Line(msgspec.Struct, kw_only=True):
    """A trial across the axes: its place on each, 0 (``low``) to 1 (``high``); None where it has no value."""

    trial_id: int
    points: list[float | None]


class SweepView(msgspec.Struct, kw_only=True):
    """A sweep as both viewers show it."""

    sweep_id: str
    name: str
    project: str
    status: str
    method: str
    metric: MetricGoal
    message: str
    best_trial: int | None
    columns: list[str]
    """The sweep's parameters, in the spec's order: the table's value columns and the parallel coordinates' axes."""
    trials: list[TrialRow]
    lineage: list[LineageRow]
    marks: list[CurveMark]
    runs: list[str]
    """The trials' run ids in trial order: a curve's colour is its place here."""
    live: bool
    """Anything left to happen (the sweep runs): viewers ask again."""
    axes: list[Axis] = []
    """The parallel coordinates' axes: the parameters, then the metric (its best)."""
    lines: list[Line] = []
    """A line per trial across ``axes`` (values → metric)."""


def _number(v: Value | float | None) -> float | None:
    """A finite number's value (None for anything else: text, a flag, none, NaN)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def _places(values: list[Value | float | None]) -> tuple[list[float | None], str, str]:
    """Where each value sits on its axis, 0 to 1 (numbers by their range, on a log scale where all are positive
    and span over a decade; anything else by its order among the others); the ends' labels."""
    known = [v for v in values if v is not None]
    if not known:
        return [None] * len(values), "—", "—"
    nums = [_number(v) for v in values]
    if all(n is not None for n, v in zip(nums, values, strict=True) if v is not None):
        present = [n for n in nums if n is not None]
        lo, hi = min(present), max(present)
        log = lo > 0 and hi / lo > 10
        at = [None if n is None else (math.log(n) if log else n) for n in nums]
        low, high = (math.log(lo), math.log(hi)) if log else (lo, hi)
        return [None if a is None else (a - low) / (high - low) if high > low else 0.5 for a in at], \
            value_text(lo), value_text(hi)
    order = sorted({str(v) for v in known})
    step = 1 / (len(order) - 1) if len(order) > 1 else 0.0
    return [None if v is None else order.index(str(v)) * step if step else 0.5 for v in values], order[0], order[-1]


def parallel(trials: list[TrialRow], columns: list[str], metric: str) -> tuple[list[Axis], list[Line]]:
    """The parallel coordinates of ``trials``: an axis per parameter, then the metric's (each trial's best)."""
    axes: list[Axis] = []
    columns_of_places: list[list[float | None]] = []
    for name in [*columns, metric]:
        values = [t.best_value if name == metric and name not in columns else t.params.get(name) for t in trials]
        places, low, high = _places(values)
        axes.append(Axis(name=name, low=low, high=high))
        columns_of_places.append(places)
    lines = [Line(trial_id=t.trial_id, points=[column[i] for column in columns_of_places])
             for i, t in enumerate(trials)]
    return axes, lines


def value_text(value: Value | float | None) -> str:
    """A value or a metric as the viewers write it: numbers to 4 significant digits, ``—`` for none."""
    if value is None:
        return "—"
    if isinstance(value, bool) or isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return str(value)
    return f"{value:.4g}"


def _change(before: dict[str, Value], after: dict[str, Value], columns: list[str]) -> str:
    keys = [k for k in columns if k in before or k in after] + sorted((set(before) | set(after)) - set(columns))
    parts = [f"{k} {value_text(before.get(k))} → {value_text(after.get(k))}" for k in keys
             if before.get(k) != after.get(k)]
    return ", ".join(parts) or "values kept"


def _row(t: Trial, columns: list[str], best_trial: int | None) -> TrialRow:
    return TrialRow(trial_id=t.trial_id, run_id=t.run_id, status=t.status, params=t.params,
                    values=[value_text(t.params.get(c)) for c in columns], metric=value_text(t.metric),
                    best=value_text(t.best), best_value=t.best, step=value_text(t.step), exploits=len(t.lineage),
                    agent=t.agent or "",
                    message=t.message, is_best=t.trial_id == best_trial, stoppable=t.status not in FINISHED_TRIALS)


def sweep_view(info: SweepInfo) -> SweepView:
    """The one definition of a sweep's view (the server serves it; the page and the console render it)."""
    columns = list(info.spec.parameters)
    lineage: list[LineageRow] = []
    marks: list[CurveMark] = []
    for t in info.trials:
        for e in t.lineage:
            lineage.append(LineageRow(trial_id=t.trial_id, run_id=t.run_id, step=e.step, source_trial=e.source_trial,
                                      source_run_id=e.source_run_id, change=_change(e.before, e.after, columns),
                                      status=e.status, message=e.message,
                                      exploit_ms="—" if e.exploit_ms is None else f"{e.exploit_ms:.0f} ms"))
            if t.run_id is not None:
                marks.append(CurveMark(run_id=t.run_id, step=e.step, label=f"← t{e.source_trial}"))
    lineage.sort(key=lambda r: (r.step, r.trial_id))
    trials = [_row(t, columns, info.best_trial) for t in info.trials]
    axes, lines = parallel(trials, columns, info.metric.name)
    return SweepView(sweep_id=info.sweep_id, name=info.name, project=info.project, status=info.status,
                     method=info.method, metric=info.metric, message=info.message, best_trial=info.best_trial,
                     columns=columns, trials=trials, lineage=lineage, marks=marks,
                     runs=[t.run_id for t in info.trials if t.run_id], live=info.status == "running", axes=axes,
                     lines=lines)
