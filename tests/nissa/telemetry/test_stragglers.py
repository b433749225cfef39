"""The straggler check: a rank slower than the other ranks' median by the factor for some epochs running is
reported once, named, and again only after it caught up for as many epochs."""

from __future__ import annotations

import pytest

from nissa.telemetry.stragglers import STRAGGLER, StragglerCheck, StragglerConfig
from trainer.telemetry.anomaly import ANOMALIES, ESCALATING


def test_a_slow_rank_is_reported_once_named_and_again_after_it_caught_up():
    check = StragglerCheck(StragglerConfig(factor=1.5, epochs=1))
    assert check.run([0.100, 0.110, 0.100, 0.100]) == []
    found = check.run([0.100, 0.100, 0.250, 0.110])
    assert [(a.anomaly, a.rank) for a in found] == [(STRAGGLER, 2)]
    assert found[0].evidence["step_ms"] == pytest.approx(250.0) and "rank 2" in found[0].detail
    assert check.run([0.100, 0.100, 0.300, 0.110]) == []  # still slow: not reported again
    assert check.run([0.100, 0.100, 0.110, 0.110]) == []  # caught up: the check re-arms
    assert [a.rank for a in check.run([0.100, 0.100, 0.200, 0.100])] == [2]


def test_unmeasured_ranks_are_left_out_and_one_rank_has_no_median_to_compare_with():
    check = StragglerCheck(StragglerConfig(epochs=1))
    assert check.run([0.1, None]) == [] and check.run([None, None]) == []
    assert [a.rank for a in check.run([0.1, None, 0.16])] == [2]  # 1.6× the other measured rank


def test_the_factor_must_be_over_one_and_stragglers_never_open_a_debug_window():
    with pytest.raises(ValueError, match="--straggler-factor"):
        StragglerConfig(factor=1.0)
    with pytest.raises(ValueError, match="--straggler-epochs"):
        StragglerConfig(epochs=0)
    for bad in (-0.001, float("nan")):
        with pytest.raises(ValueError, match="min_excess_s"):
            StragglerConfig(min_excess_s=bad)
    assert STRAGGLER in ANOMALIES and STRAGGLER not in ESCALATING


def _reports(check: StragglerCheck, ratios: list[float]) -> list[int]:
    """The exchanges (by index) at which rank 1, at ``ratio`` times rank 0's step time, was reported."""
    return [i for i, r in enumerate(ratios) if check.run([0.100, 0.100 * r])]


def test_jitter_is_no_straggler_and_a_rank_hovering_about_the_factor_is_reported_once():
    """What a healthy two-rank run on shared cores looks like: single slow epochs, now one rank, now the other."""
    check = StragglerCheck()  # the defaults: 1.5×, 3 epochs running
    jitter = [1.0, 1.7, 1.1, 0.5, 1.6, 1.6, 0.9, 0.55, 1.8, 1.2, 1.6, 1.6, 1.0]
    assert _reports(check, jitter) == []
    hovering = [1.6, 1.7, 1.6, 1.4, 1.6, 1.3, 1.7, 1.4, 1.3, 1.6]  # never back under 1.25 for 3 epochs
    assert _reports(check, hovering) == [2]
    caught_up = [1.1, 1.0, 1.2, 1.6, 1.6, 1.7]
    assert _reports(check, caught_up) == [5]
    found = StragglerCheck().run
    for _ in range(2):
        assert found([0.100, 0.200]) == []
    assert "3 epochs running over 1.5×" in found([0.100, 0.200])[0].detail


def test_steps_of_a_few_milliseconds_apart_are_the_schedulers_time_slices_not_a_straggler():
    """Two equal ranks of 6 ms steps on a loaded machine: one descheduled a little more than the other for
    epochs on end is twice as slow by the ratio and 6 ms by the clock. Not reported by default (25 ms);
    a loop that cares about milliseconds sets the floor lower."""
    loaded = [[0.0063, 0.0125]] * 5 + [[0.0142, 0.0092]] * 5
    default = StragglerCheck()
    assert [default.run(times) for times in loaded] == [[]] * 10
    fine = StragglerCheck(StragglerConfig(min_excess_s=0.0))
    assert [[a.rank for a in fine.run(times)] for times in loaded] == [[], [], [1], [], [], [], [], [0], [], []]
    assert [a.rank for a in StragglerCheck(StragglerConfig(epochs=1)).run([0.100, 0.126])] == []  # 1.26×
    assert [a.rank for a in StragglerCheck(StragglerConfig(epochs=1)).run([0.050, 0.080])] == [1]  # 30 ms over
