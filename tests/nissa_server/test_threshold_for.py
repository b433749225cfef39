"""A threshold held for a while ("GPU utilisation below 40 for 10 minutes"): ``for_s`` on a threshold rule,
on a clock the test moves (server time is the engine's ``now``)."""

from __future__ import annotations

import pytest

from nissa_server.alerts.rules import RulesError, parse_rules
from nissa_server.alerts.series_rules import Latest, SeriesWatch


def _rules(**extra):
    return parse_rules({"rules": [{"name": "starved", "when": "threshold", "series": "system.gpu.utilization",
                                   "below": 40, **extra}]}, "alerts.toml")


def _point(value: float, key: str = "system.gpu.utilization{gpu=0,rank=0}") -> Latest:
    return Latest(run_key=1, run_id="r", run_name="r", series="system.gpu.utilization", key=key, value=value, ts=0.0)


def test_a_threshold_fires_only_once_held_for_its_duration():
    (rule,) = [r for r in _rules(for_s=600).rules if r.name == "starved"]
    assert rule.for_s == 600.0 and rule.describe()["for_s"] == 600.0
    watch = SeriesWatch()
    assert watch.firing(rule, [_point(30.0)], now=1000.0) == []  # out of range since now
    assert watch.firing(rule, [_point(25.0)], now=1599.0) == []
    ((_, subject, message),) = watch.firing(rule, [_point(20.0)], now=1600.0)
    assert subject == "system.gpu.utilization{gpu=0,rank=0}"
    assert message == "system.gpu.utilization{gpu=0,rank=0} = 20, below 40 for 600 s"
    assert watch.firing(rule, [_point(90.0)], now=1700.0) == []  # busy again: the count starts over
    assert watch.firing(rule, [_point(10.0)], now=1710.0) == []
    assert len(watch.firing(rule, [_point(10.0)], now=2310.0)) == 1


def test_without_a_duration_the_first_point_fires_and_bad_durations_are_refused():
    (rule,) = [r for r in _rules().rules if r.name == "starved"]
    ((_, _, message),) = SeriesWatch().firing(rule, [_point(30.0)], now=5.0)
    assert message == "system.gpu.utilization{gpu=0,rank=0} = 30, below 40"
    with pytest.raises(RulesError, match=r"for_s: must be a number of seconds in \[0, 604800\]"):
        _rules(for_s=-1)
    with pytest.raises(RulesError, match="unknown field 'for_s'"):
        parse_rules({"rules": [{"name": "x", "when": "stale", "series": "loss", "for_s": 5}]}, "alerts.toml")
