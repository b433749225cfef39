"""The runs table against a real server: the cursor keeps its run, w watches it, select, compare, diff."""

from __future__ import annotations

from leyline import RunStarted
from leyline.outcome import RunOutcome

from tests.support.server import running_server
from tests.tui.producer import scripted_trainer
from tests.tui.scenario import scripted_run
from tests.tui.test_live import console, until
from tui.client import RunSummary
from tui.runs_table import columns, config_diff, differing_params, matches, sort_runs
from tui.screens.charts import ChartScreen
from tui.screens.config_diff import ConfigDiffScreen
from tui.screens.run_picker import RunPickerScreen
from tui.screens.run_view import RunViewScreen


def _run(name: str, lr: float, status: str = "finished", best: float | None = None) -> RunSummary:
    return RunSummary(run_id=f"{name}-id", name=name, status=status, started=1000.0, duration_s=60.0,
                      params={"lr": lr, "policy": "ppo", "n_envs": 4},
                      summary=RunOutcome(best_accuracy=best) if best is not None else None)


def test_only_config_values_that_differ_become_columns_and_unknowns_sort_last():
    runs = [_run("a", 3e-4, best=0.7), _run("b", 1e-3, best=0.9), _run("c", 1e-3)]
    assert differing_params(runs) == ["lr"]
    best = next(c for c in columns(["lr"]) if c.key == "best_accuracy")
    assert [r.name for r in sort_runs(runs, best, reverse=True)] == ["b", "a", "c"]
    assert [r.name for r in sort_runs(runs, best, reverse=False)] == ["a", "b", "c"]
    assert matches(runs[1], "b lr=0.001") and not matches(runs[0], "lr=0.001")
    # An older server's items: started_at and the full config, no summary.
    old = RunSummary(run_id="x", started_at=5.0, ended_at=65.0, config={"lr": 1.0})
    assert old.start_ts == 5.0 and differing_params([old, runs[0]]) == ["lr", "n_envs"]
    assert config_diff({"lr": 1, "a": 2}, {"lr": 1, "b": 3}) == ([("a", "2", "—"), ("b", "—", "3")], 1)
    loop = RunSummary(run_id="loop", params={"a_steps": 9, "lr": 0.1})  # a plain loop's run beside Esper's
    assert differing_params([*runs, loop]) == ["lr", "a_steps", "n_envs"], "set differently first; policy has its column"


async def test_the_cursor_stays_on_its_run_when_a_new_live_run_appears_above_it(tmp_path):
    with running_server(tmp_path) as url:
        async with scripted_trainer(url, "run-done") as trainer:
            await trainer.send(scripted_run("run-done", epochs=1, finish=True))
        async with scripted_trainer(url, "run-first") as first:
            await first.send(scripted_run("run-first", epochs=1, finish=False))
            app = console(url)
            async with app.run_test(size=(120, 30)) as pilot:
                picker = await until(pilot, lambda: isinstance(app.screen, RunPickerScreen) and app.screen, "picker")
                await until(pilot, lambda: picker.order == ["run-first", "run-done"], "two runs, live first")
                await pilot.press("end")
                assert picker.current_run_id() == "run-done"
                await pilot.press("home")
                assert picker.current_run_id() == "run-first"
                async with scripted_trainer(url, "run-second") as second:
                    await second.emit(RunStarted(name="later", config={"lr": 0.5}))
                    # A newer live run sorts above: the cursor moves down with its run, not stays on row 0.
                    await until(pilot, lambda: picker.order[:2] == ["run-second", "run-first"], "new run on top")
                    assert picker.current_run_id() == "run-first" and picker.table.cursor_row == 1
                    await pilot.press("w")
                    view = await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen, "view")
                    assert view.run_id == "run-first"


async def test_select_two_runs_compare_them_and_diff_their_configs(tmp_path):
    with running_server(tmp_path) as url:
        for run_id, lr in (("run-a", 0.001), ("run-b", 0.01)):
            async with scripted_trainer(url, run_id) as trainer:
                events = scripted_run(run_id, epochs=1, finish=True)
                events[0].payload.config["lr"] = lr  # type: ignore[index]
                await trainer.send(events)
        app = console(url)
        async with app.run_test(size=(120, 30)) as pilot:
            picker = await until(pilot, lambda: isinstance(app.screen, RunPickerScreen) and app.screen, "picker")
            await until(pilot, lambda: len(picker.order) == 2, "two runs")
            await pilot.press("slash", *"lr=0.01", "enter")
            await until(pilot, lambda: picker.order == ["run-b"], "filtered")
            await pilot.press("escape")
            await until(pilot, lambda: len(picker.order) == 2, "filter cleared")
            await pilot.press("home", "space", "space")
            assert picker.selected == {"run-a", "run-b"}
            await pilot.press("equals_sign")
            diff = await until(pilot, lambda: isinstance(app.screen, ConfigDiffScreen) and app.screen, "diff")
            await until(pilot, lambda: diff.rows is not None, "diff loaded")
            assert [row[0] for row in diff.rows] == ["lr"]
            await pilot.press("escape")
            await pilot.press("c")
            charts = await until(pilot, lambda: isinstance(app.screen, ChartScreen) and app.screen, "overlay")
            assert sorted(charts.run_ids) == ["run-a", "run-b"] and charts.view.by_run
