"""``leyline.run_keys``: a run's series keys as it shows them (the rank only in a run of several), and back."""

from __future__ import annotations

from leyline import Metrics, make_event
from leyline.query import field_of, short_key
from leyline.run_keys import run_key, shown_key, shown_metrics, shown_point, stored_key
from leyline.series import points_of


def test_a_run_of_one_rank_shows_its_series_as_its_loop_named_them():
    assert shown_key("val_loss{rank=0}", 1) == "val_loss"
    assert shown_key("acc{env=0,rank=0}", 1) == "acc{env=0}"
    assert shown_key("command_status.x{rank=-1}", 1) == "command_status.x{rank=-1}", "the server's own: kept"
    assert shown_metrics({"val_loss{rank=0}": 1, "lr{rank=0}": 2}, 1) == {"val_loss": 1, "lr": 2}


def test_a_run_of_several_ranks_keeps_each_ranks():
    assert shown_key("val_loss{rank=0}", 2) == "val_loss{rank=0}"
    assert shown_key("acc{env=3,rank=1}", 2) == "acc{env=3,rank=1}"
    assert shown_metrics({"val_loss{rank=1}": 1}, 4) == {"val_loss{rank=1}": 1}


def test_a_key_without_a_rank_is_rank_0s_as_stored_the_same_rule_as_a_query():
    for key in ("val_loss{rank=0}", "acc{env=0,rank=0}", "x.min{rank=0}", "loss{rank=1}"):
        assert stored_key(shown_key(key, 1)) == key
        assert field_of(short_key(shown_key(key, 1)) + ".best").name == key
    assert stored_key("val_loss") == "val_loss{rank=0}" and stored_key("acc{env=2}") == "acc{env=2,rank=0}"
    assert short_key("x.min") == "x.min{}", "a name ending in a statistic's keeps its braces without a rank too"


def test_a_point_takes_its_runs_key():
    (point,) = points_of(make_event(Metrics(values={"loss": 0.5}, labels={"split": "val"}), run_id="r", seq=1,
                                    ts=1.0, rank=0, step=3))
    assert point.key == "loss{rank=0,split=val}"
    shown = shown_point(point, 1)
    assert (shown.key, shown.labels, shown.value, shown.step) == ("loss{split=val}", {"split": "val"}, 0.5, 3)
    assert shown_point(point, 2) is point


def test_a_series_however_written_is_read_under_the_key_its_run_shows():
    """A query's or a column's ``val_loss`` is rank 0's whatever the run's ranks; so is an older link's
    ``val_loss{rank=0}`` in a run of one rank; another rank's is its own."""
    for written in ("val_loss", "val_loss{rank=0}"):
        assert run_key(written, 1) == "val_loss" and run_key(written, 2) == "val_loss{rank=0}"
    assert run_key("val_loss{rank=1}", 2) == "val_loss{rank=1}" and run_key("val_loss{rank=1}", 1) == "val_loss{rank=1}"
    assert run_key("acc{env=2}", 1) == "acc{env=2}" and run_key("acc{env=2}", 4) == "acc{env=2,rank=0}"
    assert run_key("x.min{}", 1) == "x.min" and run_key("x.min{}", 2) == "x.min{rank=0}", "a query's x.min"
    assert stored_key("x.min{}") == "x.min{rank=0}" and run_key("not{a key", 2) == "not{a key"
