"""The runs table against a real server: the cursor keeps its run, w watches it; its column model."""

from __future__ import annotations

from leyline import MetricSummary, RunStarted, RunStatus, RunSummary
from leyline.groups import GroupRow, MetricStats
from leyline.query import short_key
from leyline.runs_table import differing_params, shared_metrics, table_columns
from tests.support.server import running_server
from tests.support.sweep import best_text, mixed_ranks, store_runs
from tests.tui.live_console import console, until
from tests.tui.producer import scripted_trainer
from tests.tui.scenario import scripted_run
from tui.runs_table import (
    columns,
    fmt_stats,
    group_keys,
    series_name,
    short_id,
)
from tui.screens.run_edit import parse_tags
from tui.screens.run_picker import RunPickerScreen
from tui.screens.run_view import RunViewScreen

WHO = {"name": "r", "status": RunStatus.FINISHED, "created_at": 1.7e9, "last_seen_at": 1.7e9}
"""What every row says of its run."""


def _run(name: str, lr: float, metrics: dict[str, float] | None = None, **extra) -> RunSummary:
    return RunSummary(run_id=f"{name}-id", name=name, status=RunStatus.FINISHED, created_at=1000.0,
                      last_seen_at=1060.0, started_at=1000.0, duration_s=60.0,
                      config={"lr": lr, "policy": "ppo", "n_envs": 4},
                      metrics={k: MetricSummary(last=v, min=v / 2, max=v, best=v / 2, count=3, step=3)
                               for k, v in (metrics or {}).items()}, **extra)  # one rank: keys without one


def test_columns_are_the_shared_metrics_then_the_config_values_that_differ():
    runs = [_run("a", 3e-4, {"loss": 1.0, "val_loss": 0.8, "system.cpu": 3.0}),
            _run("b", 1e-3, {"loss": 0.5, "val_loss": 0.4, "acc": 0.9}, group="sweep", tags=["x", "y"]),
            _run("c", 1e-3)]
    assert shared_metrics(runs) == ["loss", "val_loss"], "acc: one run only; system.*: the machine's"
    assert shared_metrics([runs[0]]) == ["loss", "val_loss"] and shared_metrics([runs[2]]) == []
    ranks = RunSummary(run_id="r", **WHO, metrics={k: runs[0].metrics["loss"]
                                                   for k in ("loss{rank=1}", "x{rank=0}")})
    assert shared_metrics([ranks]) == ["x"], "rank 0's series by default, by its name"
    assert short_key("acc{env=2,rank=0}") == "acc{env=2}" and short_key("x.min{rank=0}") == "x.min{}"
    assert short_key("loss{rank=1}") == "loss{rank=1}" and series_name("acc{env=2}.best") == "acc"
    assert series_name("x.min{}.last") == "x.min" and series_name("val_loss.best") == "val_loss"
    assert differing_params(runs) == ["lr"]
    cols = columns(shared_metrics(runs), "best", differing_params(runs))
    assert [c.key for c in cols] == ["status", "name", "id", "loss.best", "val_loss.best", "config.lr", "project",
                                     "group", "tag", "started", "duration"]
    by_key = {c.key: c for c in cols}
    assert by_key["val_loss.best"].text(runs[1]).plain == "0.2" and by_key["val_loss.best"].text(runs[2]).plain == "—"
    assert by_key["tag"].text(runs[1]).plain == "x y" and by_key["group"].text(runs[1]).plain == "sweep"
    last = {c.key: c for c in columns(["val_loss"], "last", [])}
    assert last["val_loss.last"].text(runs[1]).plain == "0.4"
    old = RunSummary(run_id="x", **WHO, started_at=5.0, ended_at=65.0, config={"lr": 1.0})
    assert differing_params([old, runs[0]]) == ["lr", "n_envs", "policy"]
    loop = RunSummary(run_id="loop", **WHO, config={"a_steps": 9, "lr": 0.1})  # a plain loop's run beside Esper's
    assert differing_params([*runs, loop]) == ["lr", "a_steps", "n_envs", "policy"], "set differently first"


def test_the_default_columns_keep_the_run_s_machinery_out():
    summary = MetricSummary(last=1.0, min=1.0, max=1.0, best=1.0, count=1, step=1)
    keys = ("run_finished.duration_s{rank=0}", "hub_health.queue_depth{rank=0}", "system.cpu.percent{rank=0}",
            "epoch_completed.accuracy{env=0,rank=0}", "run_started.world_size{rank=0}", "final_accuracy{rank=1}")
    machinery = RunSummary(run_id="e", **WHO, metrics=dict.fromkeys(keys, summary))
    assert table_columns([machinery]).metrics == [], "the run's machinery, other kinds' measures, other ranks"
    both = [machinery, RunSummary(run_id="l", **WHO, metrics={"final_accuracy{rank=0}": summary, **machinery.metrics})]
    assert table_columns(both).metrics == ["final_accuracy"], "a loop's own (logged or set outright)"
    assert table_columns(both).names["final_accuracy{rank=0}"] == "final_accuracy" and table_columns(both).params == []


def test_a_group_row_shows_its_value_count_and_mean_sd_and_its_runs_are_one_filter_term_away():
    row = GroupRow(value=0.01, count=3, run_ids=["a", "b", "c"],
                   metrics={"val_loss.best": MetricStats(n=3, mean=0.41234, sd=0.0123, min=0.4, max=0.43)})
    cols = {c.key: c for c in columns(["val_loss{rank=0}"], "best", ["lr"])}
    assert cols["name"].group_text(row).plain == "0.01" and cols["status"].group_text(row).plain == "3 runs"
    assert cols["val_loss.best"].group_text(row).plain == "0.4123 ± 0.012"
    assert fmt_stats(MetricStats(n=1, mean=0.5)) == "0.5" and fmt_stats(None) == "—"
    assert group_keys(["lr"]) == [None, "group", "project", "config.lr"]
    assert parse_tags("a, b  a,c") == ["a", "b", "c"]
    assert short_id("sweep-lr0.05-20261127-164530-a86231-x") == "…lr0.05-20261127-164530-a86231-x"
    assert short_id("r-1") == "r-1"


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



async def test_runs_of_one_and_of_two_ranks_share_one_metric_column(tmp_path):
    """One ``val_loss.best`` column holds both runs' values, rank 0's of the run of two (``leyline.runs_table``);
    rank 1's is a column the metric picker offers."""
    with running_server(tmp_path) as url:
        one, two = runs = mixed_ranks()
        ids = store_runs(url, runs)
        app = console(url)
        async with app.run_test(size=(160, 30)) as pilot:
            picker = await until(pilot, lambda: isinstance(app.screen, RunPickerScreen) and app.screen, "picker")
            await until(pilot, lambda: sorted(picker.order) == sorted(ids.values()), "both runs")
            keys = [str(k.value) for k in picker.table.columns]
            assert [k for k in keys if k.endswith(".best")] == ["loss.best", "val_loss.best"]
            assert [picker.table.get_cell(ids[spec.name], "val_loss.best").plain for spec in runs] == [
                best_text(one), best_text(two)]
            assert [k for k in picker.known_metrics if k.startswith("val_loss")] == ["val_loss", "val_loss{rank=1}"]
            picker.set_metrics(["val_loss{rank=1}"])
            await until(pilot, lambda: "val_loss{rank=1}.best" in [str(k.value) for k in picker.table.columns],
                        "rank 1's column")
            assert [picker.table.get_cell(ids[spec.name], "val_loss{rank=1}.best").plain for spec in runs] == [
                "—", best_text(two, 1)]


def test_a_long_header_is_cut_at_its_end_never_its_start():
    from tui.runs_table import metric_column, param_column

    assert metric_column("best_val_loss_seen", "best").label == "best_val_loss_seen.best"
    long = metric_column("validation/perplexity_of_the_held_out_set", "best").label
    assert long.startswith("validation/perplexity") and long.endswith("…") and len(long) == 24
    assert param_column("optimizer.learning_rate_schedule").label == "learning_rate…"
