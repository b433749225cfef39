"""The straggler check: a rank slower than the other ranks' median by the factor is reported once, named."""

from __future__ import annotations

import pytest

from trainer.telemetry.anomaly import ANOMALIES, ESCALATING
from nissa.telemetry.stragglers import STRAGGLER, StragglerCheck, StragglerConfig


def test_a_slow_rank_is_reported_once_named_and_again_after_it_caught_up():
    check = StragglerCheck(StragglerConfig(factor=1.5))
    assert check.run([0.010, 0.011, 0.010, 0.010]) == []
    found = check.run([0.010, 0.010, 0.025, 0.011])
    assert [(a.anomaly, a.rank) for a in found] == [(STRAGGLER, 2)]
    assert found[0].evidence["step_ms"] == pytest.approx(25.0) and "rank 2" in found[0].detail
    assert check.run([0.010, 0.010, 0.030, 0.011]) == []  # still slow: not reported again
    assert check.run([0.010, 0.010, 0.011, 0.011]) == []  # caught up: the check re-arms
    assert [a.rank for a in check.run([0.010, 0.010, 0.020, 0.010])] == [2]


def test_unmeasured_ranks_are_left_out_and_one_rank_has_no_median_to_compare_with():
    check = StragglerCheck()
    assert check.run([0.01, None]) == [] and check.run([None, None]) == []
    assert [a.rank for a in check.run([0.01, None, 0.016])] == [2]  # 1.6× the other measured rank


def test_the_factor_must_be_over_one_and_stragglers_never_open_a_debug_window():
    with pytest.raises(ValueError, match="--straggler-factor"):
        StragglerConfig(factor=1.0)
    assert STRAGGLER in ANOMALIES and STRAGGLER not in ESCALATING
