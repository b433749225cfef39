"""Grid, random and TPE search, and early stopping: Optuna's samplers and pruners, asked and told from the
store's rows. A study is rebuilt from those rows for each decision (they are the source of truth, so a
restarted server, or another server on the same PostgreSQL, decides the same way); what a pruner remembers
of a trial (its rungs) is kept with the trial."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState, create_trial

from leyline.sweeps import SweepSpec, Value
from nissa_server.store.sweeps_sql import TrialRow

logger = logging.getLogger(__name__)

_STATES = {"finished": TrialState.COMPLETE, "stopped": TrialState.COMPLETE, "pruned": TrialState.PRUNED,
           "failed": TrialState.FAIL, "queued": TrialState.RUNNING, "running": TrialState.RUNNING}


def distributions(spec: SweepSpec) -> dict[str, BaseDistribution]:
    out: dict[str, BaseDistribution] = {}
    for name, p in spec.parameters.items():
        if p.values is not None:
            out[name] = CategoricalDistribution(p.values)
        elif p.is_int:
            out[name] = IntDistribution(int(p.min or 0), int(p.max or 0), log=p.log)
        else:
            out[name] = FloatDistribution(float(p.min or 0.0), float(p.max or 0.0), log=p.log)
    return out


def _sampler(spec: SweepSpec, n: int) -> optuna.samplers.BaseSampler:
    if spec.method == "grid":
        return optuna.samplers.GridSampler({k: list(p.values or ()) for k, p in spec.parameters.items()},
                                           seed=spec.seed)
    if spec.method == "tpe":
        return optuna.samplers.TPESampler(seed=spec.seed + n, n_startup_trials=max(2, min(10, spec.budget // 3)))
    return optuna.samplers.RandomSampler(seed=spec.seed + n)


def _pruner(spec: SweepSpec) -> optuna.pruners.BasePruner:
    stop = spec.early_stop
    if stop is None:
        return optuna.pruners.NopPruner()
    if stop.kind == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=stop.min_steps)
    return optuna.pruners.SuccessiveHalvingPruner(min_resource=stop.min_steps, reduction_factor=stop.reduction)


def _valid(dists: Mapping[str, BaseDistribution], params: Mapping[str, Value]) -> dict[str, Value] | None:
    out: dict[str, Value] = {}
    for name, dist in dists.items():
        if name not in params:
            return None
        try:
            if not dist._contains(dist.to_internal_repr(params[name])):  # noqa: SLF001 - optuna's own check
                return None
        except (ValueError, TypeError):
            return None
        out[name] = params[name]
    return out


def study(spec: SweepSpec, rows: Sequence[TrialRow], reports: Mapping[int, Mapping[int, float]],
          ) -> tuple[optuna.Study, dict[int, int]]:
    """The sweep's trials as an Optuna study (lost trials left out: a trial queued again carries their values);
    and each trial's number in it."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    s = optuna.create_study(direction=spec.metric.goal, sampler=_sampler(spec, len(rows)), pruner=_pruner(spec))
    dists = distributions(spec)
    numbers: dict[int, int] = {}
    for row in rows:
        state = _STATES.get(row.status)
        params = _valid(dists, row.params)
        if state is None or params is None:
            continue
        if state == TrialState.COMPLETE and row.metric is None:
            state = TrialState.FAIL
        s.add_trial(create_trial(
            params=params, distributions=dists, state=state,
            value=row.metric if state == TrialState.COMPLETE else None,
            intermediate_values=dict(reports.get(row.trial_id, {})), system_attrs=json.loads(row.attrs or "{}")))
        numbers[row.trial_id] = len(numbers)
    return s, numbers


def ask(spec: SweepSpec, rows: Sequence[TrialRow], reports: Mapping[int, Mapping[int, float]]) -> dict[str, Value]:
    """The next trial's values, from the sweep's sampler given every trial so far."""
    s, _ = study(spec, rows, reports)
    trial = s.ask(distributions(spec))
    return dict(trial.params)


@dataclass(frozen=True)
class Verdict:
    """What the pruner said of a running trial at its latest reported step."""

    trial_id: int
    step: int
    value: float
    prune: bool
    attrs: str
    """What the pruner remembers of the trial (its rungs), to keep with it."""


def prune(spec: SweepSpec, rows: Sequence[TrialRow], reports: Mapping[int, Mapping[int, float]],
          candidates: Sequence[int]) -> list[Verdict]:
    """The sweep's pruner on each of ``candidates`` (running trials with a new report)."""
    if spec.early_stop is None or not candidates:
        return []
    s, numbers = study(spec, rows, reports)
    frozen = s.get_trials(deepcopy=False)
    out = []
    for trial_id in candidates:
        number = numbers.get(trial_id)
        if number is None or not frozen[number].intermediate_values:
            continue
        trial = frozen[number]
        step = max(trial.intermediate_values)
        verdict = s.pruner.prune(s, trial) if step >= spec.early_stop.min_steps else False
        attrs = json.dumps(s.get_trials(deepcopy=False)[number].system_attrs)
        out.append(Verdict(trial_id, step, trial.intermediate_values[step], bool(verdict), attrs))
    return out
