"""``nissa runs``' rows over a run of one rank and a run of two: a metric, the default ones or one ``--metric``
names, is rank 0's in both (``leyline.runs_table.metric_of``); another rank's when named."""

from __future__ import annotations

import msgspec

from leyline.text import has_control
from nissa.cli import _column, _rows
from tests.leyline.test_runs_table import ONE, TWO, _run


def test_a_metric_column_is_rank_0s_in_runs_of_one_rank_and_of_several():
    head, *rows = _rows([ONE, TWO], [], table=True)
    assert head[-2:] == ["lr.min{}.best", "val_loss.best"] and [row[-1] for row in rows] == ["0.5", "0.25"]
    named = [_column("val_loss.best"), _column("val_loss{rank=1}.last")]
    head, *rows = _rows([ONE, TWO], named, table=False)
    assert head[-2:] == ["val_loss.best", "val_loss{rank=1}.last"]
    assert [row[-2:] for row in rows] == [["0.5", ""], ["0.25", "0.75"]]


def test_the_head_shows_a_keys_control_characters_as_the_cells_show_a_runs():
    # A series key stored before ingest scrubbed escaped ones (``loss{env=<U+202E><U+009B><DEL>}``), a config key too.
    runs = [msgspec.structs.replace(_run(f"r{i}", 1, {"loss{env=\u202e\x9b\x7f}": 0.5}), config={"k\x1b[2J": i})
            for i in range(2)]
    for table in (True, False):
        head, *rows = _rows(runs, [], table=table)
        assert not any(has_control(h) for h in head), head
        assert head[-2:] == ["config.k\u241b[2J", "loss{env=<202E><9B>\u2421}.best"], head
