"""PBT's exploit and explore, and Optuna's samplers and pruners as a sweep uses them (pure functions on rows)."""

from __future__ import annotations

import itertools
import random

from leyline.sweeps import decode_spec
from nissa_server.store.sweeps_sql import TrialRow
from nissa_server.sweeps import pbt, search


def _spec(**changes: object):
    data = {"name": "s", "method": "pbt", "metric": {"name": "loss"}, "command": ["x"], "trials": 4, "parallel": 4,
            "parameters": {"lr": {"min": 0.001, "max": 1.0, "log": True}, "opt": {"values": ["sgd", "adam", "rms"]}},
            "pbt": {"quantile": 0.25, "perturb": [0.5, 2.0], "resample": 0.0}}
    data.update(changes)
    return decode_spec(data)


def _row(trial_id: int, status: str, params: dict, metric: float | None = None, attrs: str = "{}") -> TrialRow:
    return TrialRow(trial_id=trial_id, run_id=f"s-t{trial_id}", status=status, params=params, origin=None, agent=None,
                    lease_until=None, exit_code=None, metric=metric, best=metric, step=None, next_check=0, attrs=attrs,
                    message="")


def test_the_bottom_quantile_copies_from_the_top():
    spec = _spec()
    population = [pbt.Member(1, 0.9, 10), pbt.Member(2, 0.1, 10), pbt.Member(3, 0.5, 10), pbt.Member(4, 0.4, 10)]
    assert pbt.quantiles(spec, population) == ([2], [1])
    assert pbt.choose_source(spec, population, 1, random.Random(0)) == 2
    assert pbt.choose_source(spec, population, 3, random.Random(0)) is None
    maximize = _spec(metric={"name": "acc", "goal": "maximize"})
    assert pbt.quantiles(maximize, population) == ([1], [2])
    assert pbt.quantiles(spec, [pbt.Member(1, float("nan"), 1), pbt.Member(2, 0.3, 1)]) == ([], [])


def test_explore_perturbs_by_a_factor_moves_a_choice_to_a_neighbour_and_stays_inside_the_range():
    spec = _spec()
    seen = {pbt.explore(spec, {"lr": 0.1, "opt": "adam"}, random.Random(seed))["lr"] for seed in range(40)}
    assert seen == {0.05, 0.2}
    choices = {pbt.explore(spec, {"lr": 0.1, "opt": "adam"}, random.Random(seed))["opt"] for seed in range(40)}
    assert choices == {"sgd", "rms"}
    assert pbt.explore(spec, {"lr": 0.9, "opt": "sgd"}, random.Random(1))["lr"] <= 1.0
    resampled = _spec(pbt={"resample": 1.0})
    values = [pbt.explore(resampled, {"lr": 0.1, "opt": "adam"}, random.Random(s))["lr"] for s in range(20)]
    assert len(set(values)) == 20 and all(0.001 <= v <= 1.0 for v in values)


def test_grid_asks_each_point_once():
    spec = decode_spec({"name": "g", "method": "grid", "metric": {"name": "loss"}, "command": ["x"], "trials": 50,
                        "parameters": {"a": {"values": [1, 2, 3]}, "b": {"values": ["x", "y"]}}})
    rows: list[TrialRow] = []
    for i in range(spec.budget):
        rows.append(_row(i + 1, "running", search.ask(spec, rows, {})))
    assert sorted((r.params["a"], r.params["b"]) for r in rows) == sorted(itertools.product([1, 2, 3], ["x", "y"]))


def test_asha_prunes_a_trial_behind_its_peers_at_a_rung_and_remembers_the_rungs():
    spec = decode_spec({"name": "a", "method": "random", "metric": {"name": "loss"}, "command": ["x"], "trials": 8,
                        "parameters": {"lr": {"min": 0.001, "max": 1.0}},
                        "early_stop": {"kind": "asha", "min_steps": 1, "reduction": 2}})
    rows, reports = [], {}
    for i, value in enumerate([0.1, 0.2, 0.3], start=1):  # three finished trials, each judged at its rungs
        rows.append(_row(i, "running", {"lr": 0.1}))
        reports[i] = {1: value, 2: value, 4: value}
        [verdict] = search.prune(spec, rows, reports, [i])
        rows[-1] = _row(i, "finished", {"lr": 0.1}, value, verdict.attrs)
    rows.append(_row(4, "running", {"lr": 0.5}))
    reports[4] = {1: 5.0}
    [late] = search.prune(spec, rows, reports, [4])
    assert late.prune and late.step == 1 and late.value == 5.0
    rows[-1] = _row(4, "running", {"lr": 0.05})
    reports[4] = {1: 0.05}
    [good] = search.prune(spec, rows, reports, [4])
    assert not good.prune and "completed_rung_0" in good.attrs


def test_tpe_and_random_ask_values_inside_the_ranges():
    for method in ("random", "tpe"):
        spec = decode_spec({"name": "t", "method": method, "metric": {"name": "loss"}, "command": ["x"],
                            "trials": 20, "parameters": {"lr": {"min": 0.001, "max": 1.0, "log": True},
                                                         "n": {"min": 1, "max": 8}}})
        rows = [_row(i, "finished", {"lr": 0.01 * i, "n": i % 8 + 1}, metric=float(i)) for i in range(1, 13)]
        params = search.ask(spec, rows, {})
        assert 0.001 <= params["lr"] <= 1.0 and isinstance(params["n"], int) and 1 <= params["n"] <= 8
