"""How live points join a chart's history, and what a chart draws (smoothing, best-so-far, windows)."""

from __future__ import annotations

import math

import numpy as np

from leyline import make_event
from leyline.esper import EpochCompleted
from leyline.run_keys import shown_key
from leyline.series import points_of
from tui.chart_data import SeriesSet, running_best, smooth, window

ACC = "epoch_completed.accuracy"


def _epoch(seq: int, step: int, accuracy: float, env: int = 0):
    return make_event(EpochCompleted(accuracy=accuracy, val_loss=1.0), run_id="r", seq=seq, ts=1000.0 + seq,
                      step=step, epoch=seq, env=env)


def _history(steps: list[int], values: list[float]) -> list[dict]:
    return [{"key": f"{ACC}{{env=0}}", "labels": {"env": "0"}, "x": steps, "y": values}]  # a run of one rank


def test_live_points_before_their_history_are_kept_back_then_only_past_its_end_are_added():
    data = SeriesSet("step")
    data.wanted.add(ACC)
    # Live points stream in while the history is being read; the history covers the first two.
    data.add_events("r", [_epoch(2, 20, 0.2), _epoch(3, 30, 0.3)])
    assert not data.tracks
    data.load_history("r", ACC, _history([0, 10, 20], [0.0, 0.1, 0.2]))
    data.add_events("r", [_epoch(4, 40, 0.4)])
    (track,) = data.tracks_of(ACC)
    assert track.x == [0, 10, 20, 30, 40] and track.y == [0.0, 0.1, 0.2, 0.3, 0.4]
    assert track.label_text == "env=0"


def test_after_its_history_every_live_point_is_appended_once_even_when_x_goes_back():
    data = SeriesSet("step")
    data.wanted.add(ACC)
    data.load_history("r", ACC, _history([100], [0.5]))
    data.add_events("r", [_epoch(5, 50, 0.6)])  # a resumed run trains from an earlier step again
    (track,) = data.tracks_of(ACC)
    assert track.x == [100, 50]


def test_names_not_charted_are_only_listed_and_nan_from_the_server_is_a_gap():
    data = SeriesSet("step")
    data.add_events("r", [_epoch(1, 10, 0.1)])
    assert ACC in data.names_seen and not data.tracks
    data.wanted.add(ACC)
    data.load_history("r", ACC, _history([0, 10], [None, 0.1]))
    (track,) = data.tracks_of(ACC)
    assert math.isnan(track.y[0]) and track.last() == 0.1


def test_points_come_from_the_same_definition_as_the_server():
    data = SeriesSet("epoch")
    data.wanted.add(ACC)
    data.load_history("r", ACC, [])
    event = _epoch(7, 70, 0.7, env=3)
    data.add_events("r", [event])
    (track,) = data.tracks_of(ACC)
    assert track.key == shown_key(points_of(event)[0].key, 1) == f"{ACC}{{env=3}}" and track.x == [7.0]


def test_live_points_take_the_keys_the_server_shows_the_rank_only_in_a_run_of_several():
    data = SeriesSet("step")
    data.wanted.add(ACC)
    data.know_world("two", 2)
    for run in ("one", "two"):
        data.load_history(run, ACC, [])
        data.add_events(run, [_epoch(1, 10, 0.1)])
    assert [(t.run_id, t.key, t.label_text) for t in data.tracks_of(ACC)] == [
        ("one", f"{ACC}{{env=0}}", "env=0"), ("two", f"{ACC}{{env=0,rank=0}}", "env=0,rank=0")]


def test_smoothing_is_a_debiased_ema_that_skips_gaps():
    y = np.array([1.0, 3.0, math.nan, 5.0])
    out = smooth(y, 0.5)
    # EMA 0.5, then 0.5*0.5 + 0.5*3 = 1.75, the gap skipped, then 1.75*0.5 + 0.5*5 = 3.375; each divided
    # by 1 - 0.5**count (the bias of starting at 0): 1, 2.333, gap, 3.857
    assert out[0] == 1.0 and math.isclose(out[1], 1.75 / 0.75) and math.isnan(out[2])
    assert math.isclose(out[3], 3.375 / 0.875)
    assert smooth(y, 0.0) is y


def test_best_so_far_follows_the_better_direction():
    y = np.array([0.3, 0.1, 0.5, 0.4])
    assert running_best(y, True).tolist() == [0.3, 0.3, 0.5, 0.5]
    assert running_best(y, False).tolist() == [0.3, 0.1, 0.1, 0.1]


def test_a_window_keeps_the_neighbours_and_the_extremes_when_downsampled():
    x = np.arange(10_000, dtype=float)
    y = np.sin(x / 50.0)
    y[7_777] = 9.0  # a spike must survive downsampling to 200 points
    wx, wy = window(x, y, None, None, 200)
    assert len(wx) <= 200 and wy.max() == 9.0 and wy.min() < -0.999
    wx, _ = window(x, y, 100.5, 200.5, 500)
    assert wx[0] == 100 and wx[-1] == 201  # one point past each edge, so lines reach them


def test_a_second_history_of_a_loaded_series_does_not_drop_the_live_points_since_the_first():
    data = SeriesSet("step")
    data.wanted.add(ACC)
    data.load_history("r", ACC, _history([0], [0.0]))
    data.add_events("r", [_epoch(2, 20, 0.2)])
    data.load_history("r", ACC, _history([0], [0.0]))  # read before the live point, answered after it
    assert data.tracks_of(ACC)[0].x == [0, 20]


def test_a_name_first_seen_live_is_wanted_when_a_chart_takes_it_and_waits_for_its_history():
    data = SeriesSet("step")
    data.accept = lambda name: name == ACC
    data.add_events("r", [_epoch(1, 10, 0.1)])
    assert ACC in data.wanted and data.needs_history("r") == [ACC] and not data.tracks
    data.load_history("r", ACC, _history([10], [0.1]))  # the history holds that point: shown once
    assert data.tracks_of(ACC)[0].x == [10]


def test_a_legend_keeps_the_full_series_name_and_a_pattern_chart_its_distinct_part():
    from leyline.charts import DEFAULT_CHARTS, ChartDef
    from tui.chart_data import Track
    from tui.widgets.chart import ChartPanel

    val = Track(run_id="r", key="val.loss", name="val.loss", labels={})
    assert val.label_text == "val.loss", "not 'loss': that is another series of the run"
    assert ChartPanel(ChartDef.of_name("val.loss"))._short(val) == "val.loss"
    head = Track(run_id="r", key="ppo_update.entropy.op", name="ppo_update.entropy.op", labels={})
    entropy = next(c for c in DEFAULT_CHARTS if c.title == "entropy")
    assert ChartPanel(entropy)._short(head) == "op"


def test_a_chart_is_loading_until_its_runs_series_are_known_then_says_what_it_lacks():
    from leyline.charts import ChartDef
    from tui.widgets.chart import ChartPanel, ChartView

    data = SeriesSet("step")
    data.runs_expected = {"r"}
    panel = ChartPanel(ChartDef.of_name("val.loss"))
    assert panel._empty_reason(data, ChartView()) == "loading…", "not 'no such series' before the listing"
    data.listed.add("r")
    assert panel._empty_reason(data, ChartView()) == "no such series in this run"
    data.reset("epoch")  # another x axis keeps what is known of the runs
    assert data.listed == {"r"} and data.runs_expected == {"r"}
