"""Group rows, bands and config diffs against numbers worked out by hand."""

import math

import pytest

from leyline import query
from nissa_server.groups import MAX_GROUP_RUNS, Member, band, config_diff, group_rows, stats

pytestmark = pytest.mark.single_backend  # no database: the arithmetic itself


def test_stats_are_mean_sample_sd_min_max_of_the_finite_values():
    s = stats([1.0, 2.0, 6.0, None, math.nan, math.inf])
    assert (s.n, s.mean, s.min, s.max) == (3, 3.0, 1.0, 6.0)
    assert s.sd == pytest.approx(math.sqrt(((1 - 3) ** 2 + (2 - 3) ** 2 + (6 - 3) ** 2) / 2))  # n - 1: 2.6458
    one = stats([0.5])
    assert (one.n, one.mean, one.sd, one.min, one.max) == (1, 0.5, None, 0.5, 0.5)
    assert stats([None, math.nan]).n == 0 and stats([]).mean is None


def test_rows_are_one_per_value_in_value_order_with_runs_without_the_key_last():
    members = [
        Member("a", 0.01, {"val_loss.best": 0.5, "acc.last": 0.9}),
        Member("b", 0.001, {"val_loss.best": 0.7}),
        Member("c", 0.01, {"val_loss.best": 0.3, "acc.last": 0.8}),
        Member("d", None, {"val_loss.best": 1.0}),
        Member("e", "adam", {}),
        Member("f", 1, {"val_loss.best": 2.0}),
        Member("g", True, {"val_loss.best": 3.0}),
    ]
    rows = group_rows("group", members, ["val_loss.best", "acc.last"])
    assert [r.value for r in rows] == [0.001, 0.01, 1, True, "adam", None]  # True is text-ordered, never 1
    lr = rows[1]
    assert (lr.count, lr.run_ids) == (2, ["a", "c"])
    assert lr.metrics["val_loss.best"].mean == pytest.approx(0.4)
    assert lr.metrics["val_loss.best"].sd == pytest.approx(math.sqrt(0.02))  # ((0.1)^2 + (0.1)^2) / 1
    assert lr.metrics["acc.last"].mean == pytest.approx(0.85) and lr.metrics["acc.last"].n == 2
    assert rows[0].metrics["acc.last"].n == 0 and rows[-1].run_ids == ["d"]
    assert [r.filter for r in rows] == ["group:0.001", "group:0.01", "group:1", "group:true", "group:adam", None]


def test_a_group_s_filter_picks_its_value_whatever_it_holds():
    odd = ["a b,c", 'say "hi"', "-x", "{", "a\\b"]
    rows = group_rows("config.opt", [Member(v, v, {}) for v in odd], [])
    for row in rows:
        assert row.filter is not None
        (clause,) = query.parse(row.filter)
        assert (clause.field, clause.values) == (query.Field("config", "opt"), (row.value,)), row.filter


def test_a_big_group_counts_every_run_and_names_the_first():
    rows = group_rows("group", [Member(f"r{i}", "g", {"m": float(i)}) for i in range(MAX_GROUP_RUNS + 5)], ["m"])
    assert rows[0].count == MAX_GROUP_RUNS + 5 and len(rows[0].run_ids) == MAX_GROUP_RUNS
    assert rows[0].metrics["m"].n == MAX_GROUP_RUNS + 5


def test_band_on_shared_steps_is_the_mean_and_range_at_each_step():
    lines = [([0, 10, 20], [1.0, 0.8, 0.6]), ([0, 10, 20, 30], [3.0, 0.4, None, 0.2]), ([10], [0.6])]
    b = band("loss", {}, lines, max_points=100)
    assert b.x == [0, 10, 20, 30]
    assert b.mean == pytest.approx([2.0, 0.6, 0.6, 0.2])
    assert (b.min, b.max, b.n) == ([1.0, 0.4, 0.6, 0.2], [3.0, 0.8, 0.6, 0.2], [2, 3, 1, 1])


def test_band_past_max_points_buckets_x_and_each_run_counts_once_a_bucket():
    # x from 0 to 99 in 10 buckets of width 9.9: run A's points 0..9 fall in bucket 0 (x 0..9.89) but 10 in bucket 1.
    a = (list(range(100)), [float(x) for x in range(100)])
    b_ = (list(range(0, 100, 50)), [100.0, 200.0])
    out = band("m", {"env": "0"}, [a, b_], max_points=10)
    assert len(out.x) == 10 and out.labels == {"env": "0"}
    assert out.n[0] == 2 and out.n[1] == 1
    a0 = sum(range(10)) / 10  # 4.5: run A's mean in bucket 0
    assert out.mean[0] == pytest.approx((a0 + 100.0) / 2) and (out.min[0], out.max[0]) == (a0, 100.0)
    assert out.x[0] == pytest.approx((4.5 + 0.0) / 2)
    assert band("m", {}, [], 10).x == []


def test_config_diff_of_three_runs_names_absent_keys_and_counts_the_same():
    diff = config_diff(["a", "b", "c"], ["A", "B", "C"],
                       [{"lr": 0.1, "opt": "adam", "n": 4}, {"lr": 0.2, "opt": "adam", "n": 4}, {"opt": "adam", "n": 4,
                                                                                               "wd": True}])
    assert diff.same == 2
    assert [(r.key, r.values) for r in diff.rows] == [("lr", ["0.1", "0.2", None]), ("wd", [None, None, "true"])]
    assert config_diff(["a", "b"], ["a", "b"], [{"x": 1}, {"x": 1.0}]).rows[0].values == ["1", "1.0"]
