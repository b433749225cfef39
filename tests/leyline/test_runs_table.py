"""``leyline.runs_table`` over runs of one rank and of several: a metric column is a series by its name in the
filter language, rank 0's in either kind of run (``leyline.run_keys.run_key``)."""

from __future__ import annotations

from leyline import MetricSummary, RunStatus, RunSummary
from leyline.runs_table import metric_of, shared_metrics, table_columns


def _run(run_id: str, world_size: int, values: dict[str, float]) -> RunSummary:
    return RunSummary(run_id=run_id, name=run_id, status=RunStatus.FINISHED, created_at=1.7e9, last_seen_at=1.7e9,
                      world_size=world_size, metrics={k: MetricSummary(last=v, min=v, max=v, best=v, count=1, step=1)
                                                      for k, v in values.items()})


def _best(run: RunSummary, column: str) -> float | None:
    summary = metric_of(run, column)
    return None if summary is None else summary.best


ONE = _run("one", 1, {"val_loss": 0.5, "acc": 0.9, "lr.min": 0.1})  # keys as a run of one rank shows them
TWO = _run("two", 2, {"val_loss{rank=0}": 0.25, "val_loss{rank=1}": 0.75, "acc{rank=1}": 0.8,
                      "lr.min{rank=0}": 0.2})


def test_a_mixed_table_has_one_column_per_series_rank_0s_in_both_kinds_of_run():
    columns = table_columns([ONE, TWO])
    assert columns.metrics == ["lr.min{}", "val_loss"], "acc: rank 1's only in the run of two ranks"
    assert columns.names["val_loss"] == columns.names["val_loss{rank=0}"] == "val_loss"
    assert columns.names["val_loss{rank=1}"] == "val_loss{rank=1}"
    assert [_best(run, "val_loss") for run in (ONE, TWO)] == [0.5, 0.25]
    assert [_best(run, "lr.min{}") for run in (ONE, TWO)] == [0.1, 0.2]
    assert shared_metrics([ONE, TWO]) == shared_metrics([TWO, ONE]) == ["lr.min{}", "val_loss"]


def test_columns_asked_by_key_are_named_and_other_ranks_stay_columns_of_their_own():
    columns = table_columns([ONE, TWO], ["val_loss{rank=0}", "val_loss", "val_loss{rank=1}"])
    assert columns.metrics == ["val_loss", "val_loss{rank=1}"], "an older link's rank 0: the one column"
    assert _best(ONE, "val_loss{rank=0}") == 0.5 and _best(TWO, "val_loss{rank=1}") == 0.75
    assert _best(ONE, "val_loss{rank=1}") is None and _best(ONE, "loss") is None
