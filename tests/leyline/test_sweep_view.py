"""A sweep's view (leyline.sweep_view): the rows the web page and the console both show, from one SweepInfo."""

from __future__ import annotations

from leyline.sweep_view import sweep_view, value_text
from leyline.sweeps import Exploit, MetricGoal, Parameter, SweepInfo, SweepSpec, Trial


def _info(trials: list[Trial], status: str = "running") -> SweepInfo:
    spec = SweepSpec(name="lr", method="pbt", metric=MetricGoal(name="val_loss"), command=["python", "t.py"],
                     parameters={"momentum": Parameter(values=[0.0, 0.9]), "lr": Parameter(min=1e-4, max=0.1)},
                     trials=3, parallel=3)
    return SweepInfo(sweep_id="lr-abc123", name="lr", project="p", status=status, method="pbt",  # type: ignore[arg-type]
                     metric=spec.metric, spec=spec, created_at=1.7e9, trials=trials, best_trial=2)


def test_rows_lineage_and_marks_come_from_the_sweep():
    exploit = Exploit(step=20, source_trial=2, source_run_id="lr-abc123-t2", before={"lr": 0.05, "momentum": 0.9},
                      after={"lr": 0.0024, "momentum": 0.9, "extra": 1}, at=1.7e9, status="applied", exploit_ms=412.4)
    early = Exploit(step=10, source_trial=1, source_run_id="lr-abc123-t1", before={"lr": 0.01}, after={"lr": 0.01},
                    at=1.7e9, status="failed", message="restore refused: gone")
    view = sweep_view(_info([
        Trial(trial_id=1, status="running", params={"lr": 0.0024, "momentum": 0.9}, run_id="lr-abc123-t1",
              metric=0.52, best=0.5, step=31, lineage=[exploit]),
        Trial(trial_id=2, status="finished", params={"lr": 0.002, "momentum": 0.0}, run_id="lr-abc123-t2",
              metric=0.41, best=0.41, step=33, lineage=[early]),
        Trial(trial_id=3, status="queued", params={"lr": 0.03, "momentum": 0.0}),
    ]))
    assert view.columns == ["momentum", "lr"]  # the spec's order
    assert [r.values for r in view.trials] == [["0.9", "0.0024"], ["0", "0.002"], ["0", "0.03"]]
    assert [(r.trial_id, r.is_best, r.stoppable, r.exploits) for r in view.trials] == [
        (1, False, True, 1), (2, True, False, 1), (3, False, True, 0)]
    assert [(r.step, r.trial_id, r.source_trial) for r in view.lineage] == [(10, 2, 1), (20, 1, 2)]
    assert view.lineage[1].change == "lr 0.05 → 0.0024, extra — → 1"  # each changed value once, kept ones left out
    assert view.lineage[0].change == "values kept"
    assert view.lineage[1].exploit_ms == "412 ms" and view.lineage[0].exploit_ms == "—"
    assert [(m.run_id, m.step, m.label) for m in view.marks] == [("lr-abc123-t1", 20, "← t2"),
                                                                 ("lr-abc123-t2", 10, "← t1")]
    assert view.runs == ["lr-abc123-t1", "lr-abc123-t2"] and view.live
    assert not sweep_view(_info([], status="stopped")).live


def test_value_text():
    assert [value_text(v) for v in (None, True, "adam", 3, 0.000123456, float("nan"))] == [
        "—", "True", "adam", "3", "0.0001235", "nan"]


def test_parallel_coordinates_place_each_trial_on_every_axis():
    from leyline.sweep_view import TrialRow, parallel

    def row(trial_id, params, best):
        return TrialRow(trial_id=trial_id, run_id=None, status="finished", params=params, values=[], metric="",
                        best="", best_value=best, step="", exploits=0, agent="", message="", is_best=False,
                        stoppable=False)

    trials = [row(1, {"lr": 0.001, "opt": "sgd"}, 0.5), row(2, {"lr": 0.1, "opt": "adam"}, 0.25),
              row(3, {"lr": 0.01, "opt": "sgd"}, None)]
    axes, lines = parallel(trials, ["lr", "opt"], "val_loss")
    assert [(a.name, a.low, a.high) for a in axes] == [("lr", "0.001", "0.1"), ("opt", "adam", "sgd"),
                                                       ("val_loss", "0.25", "0.5")]
    points = {line.trial_id: line.points for line in lines}
    assert points[1] == [0.0, 1.0, 1.0] and points[2] == [1.0, 0.0, 0.0]
    assert abs(points[3][0] - 0.5) < 1e-9 and points[3][2] is None  # lr on a log scale; no metric yet
