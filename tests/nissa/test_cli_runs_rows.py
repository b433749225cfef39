"""``nissa runs``' rows over a run of one rank and a run of two: a metric, the default ones or one ``--metric``
names, is rank 0's in both (``leyline.runs_table.metric_of``); another rank's when named."""

from __future__ import annotations

from nissa.cli import _column, _rows
from tests.leyline.test_runs_table import ONE, TWO


def test_a_metric_column_is_rank_0s_in_runs_of_one_rank_and_of_several():
    head, *rows = _rows([ONE, TWO], [], table=True)
    assert head[-2:] == ["lr.min{}.best", "val_loss.best"] and [row[-1] for row in rows] == ["0.5", "0.25"]
    named = [_column("val_loss.best"), _column("val_loss{rank=1}.last")]
    head, *rows = _rows([ONE, TWO], named, table=False)
    assert head[-2:] == ["val_loss.best", "val_loss{rank=1}.last"]
    assert [row[-2:] for row in rows] == [["0.5", ""], ["0.25", "0.75"]]
