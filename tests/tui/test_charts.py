"""The chart view, piloted: from a local run log (--replay --charts) and from a real server, live."""

from __future__ import annotations

import asyncio
from pathlib import Path

from leyline.esper import EpochCompleted, SeedFossilized
from leyline.series import points_of
from tests.support.server import running_server
from tests.tui.conftest import write_run_log
from tests.tui.live_console import console, until
from tests.tui.producer import scripted_trainer
from tests.tui.scenario import scripted_run
from tui.app import build_app
from tui.client import NissaClient
from tui.config import WatchConfig
from tui.screens.charts import ChartScreen
from tui.screens.series_picker import SeriesPicker
from tui.widgets.chart import ChartPanel, ChartSpec

ACC = "epoch_completed.accuracy"


def panel(screen: ChartScreen, title: str) -> ChartPanel:
    return next(p for p in screen.panels if p.spec.title == title)


async def test_replay_charts_keys_zoom_pan_smooth_axis_and_markers(tmp_path: Path):
    log = write_run_log(tmp_path / "r" / "events.jsonl")
    events = scripted_run()
    app = build_app(WatchConfig(client=None, replay_file=log, charts=True, refresh_hz=20))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await until(pilot, lambda: isinstance(app.screen, ChartScreen) and app.screen, "charts")
        acc = panel(screen, "accuracy")
        await until(pilot, lambda: len(acc.shown) == 4, "four envs drawn")
        per_env = sum(1 for e in events if e.kind.value == "epoch_completed" and e.env == 0)
        assert [len(t.x) for t in acc.shown] == [per_env] * 4
        kinds = {m.kind for m in acc.markers_shown}
        assert {"fossilized", "pruned", "anomaly", "command", "end"} <= kinds
        lo, hi = screen._extent()

        await pilot.press("plus")  # zoom in on the latest half
        assert screen.view.x_range == (lo + (hi - lo) / 2, hi)
        await pilot.press("left")  # pan back a quarter of the window
        quarter = (hi - lo) / 8
        assert screen.view.x_range == (lo + (hi - lo) / 2 - quarter, hi - quarter)
        await pilot.pause()
        assert all(screen.view.x_range[0] <= m.step <= screen.view.x_range[1] for m in acc.markers_shown)
        await pilot.press("0")
        assert screen.view.x_range is None

        await pilot.press("s", "b")
        assert screen.view.smoothing == 0.6 and screen.view.best
        await pilot.press("x")  # step → epoch: the tracks are rebuilt on the new axis
        await until(pilot, lambda: acc.shown and acc.shown[0].x[-1] == 24, "epoch axis")
        await pilot.press("l")  # only env=0
        await until(pilot, lambda: [t.label_text for t in acc.shown] == ["env=0"], "one label")

        await pilot.press("a")  # any other series, from the picker
        picker = await until(pilot, lambda: isinstance(app.screen, SeriesPicker) and app.screen, "picker")
        await pilot.press(*"val_loss", "enter")
        new = await until(pilot, lambda: any(p.spec.title == "epoch_completed.val_loss" for p in screen.panels)
                          and panel(screen, "epoch_completed.val_loss"), "new chart")
        assert picker.matching("val loss") == ["epoch_completed.val_loss"]
        await until(pilot, lambda: new.shown, "new chart drawn")
        assert not new.spec.higher_is_better

        await pilot.press("escape")  # back to the replay it was opened over
        assert not isinstance(app.screen, ChartScreen)
        await pilot.press("g")  # and from the replay, its charts again, computed from its events
        again = await until(pilot, lambda: isinstance(app.screen, ChartScreen) and app.screen, "charts again")
        await until(pilot, lambda: len(panel(again, "accuracy").shown) == 4, "drawn again")


async def test_live_points_arrive_once_and_in_order_with_their_markers(tmp_path: Path):
    with running_server(tmp_path) as url:
        async with scripted_trainer(url, "run-live") as trainer:
            first = scripted_run("run-live", epochs=4, finish=False)
            await trainer.send(first)
            app = console(url, run_id="run-live", charts=True)
            async with app.run_test(size=(100, 30)) as pilot:
                screen = await until(pilot, lambda: isinstance(app.screen, ChartScreen) and app.screen, "charts")
                acc = panel(screen, "accuracy")
                stored = [p.step for e in first for p in points_of(e) if p.key == f"{ACC}{{env=0,rank=0}}"]
                env0 = lambda: next((t for t in acc.shown if t.label_text == "env=0"), None)  # noqa: E731
                await until(pilot, lambda: env0() is not None and env0().x == stored, "history drawn")

                live_steps = []
                for i in range(3):  # live points, each through the watch stream
                    trainer.step += 100
                    trainer.epoch += 1
                    live_steps.append(trainer.step)
                    await trainer.send([trainer.event(EpochCompleted(accuracy=0.5 + i / 10, val_loss=1.0), env=0)])
                    await until(pilot, lambda: env0().x == stored + live_steps, f"live point {i}")
                assert env0().y[-3:] == [0.5, 0.6, 0.7]

                await trainer.send([trainer.event(SeedFossilized(slot="r9c9", seed_id="s-live", blueprint="conv",
                                                                 params=10), env=0)])
                await until(pilot, lambda: any(m.label == "r9c9 conv" for m in acc.markers_shown), "live marker")
                await pilot.pause(0.3)  # a few redraws later: still once
                assert env0().x == stored + live_steps
                assert sum(m.label == "r9c9 conv" for m in acc.markers_shown) == 1


async def test_compare_overlays_runs_one_colour_each(tmp_path: Path):
    with running_server(tmp_path) as url:
        async with scripted_trainer(url, "run-a") as trainer:
            await trainer.send(scripted_run("run-a", epochs=6, seed=1))
        async with scripted_trainer(url, "run-b") as trainer:
            await trainer.send(scripted_run("run-b", epochs=6, seed=2, finish=False))
            app = console(url, compare=("run-a", "run-b"))
            async with app.run_test(size=(160, 50)) as pilot:
                screen = await until(pilot, lambda: isinstance(app.screen, ChartScreen) and app.screen, "charts")
                assert screen.view.by_run
                acc = panel(screen, "accuracy")
                await until(pilot, lambda: {t.run_id for t in acc.shown} == {"run-a", "run-b"}, "both runs")
                await pilot.press("l")
                await until(pilot, lambda: sorted((t.run_id, t.label_text) for t in acc.shown)
                            == [("run-a", "env=0"), ("run-b", "env=0")], "env=0 of each run")
                head = str(screen.query_one("#chart-head").render())
                assert "run-a (finished)" in head and "run-b (live)" in head  # same names: ids tell them apart
                await pilot.press("escape")  # back to the runs table it opened over
                assert type(app.screen).__name__ == "RunPickerScreen"


async def test_charts_opened_before_the_run_has_points_fill_as_they_come(tmp_path: Path):
    with running_server(tmp_path) as url:
        async with scripted_trainer(url, "run-young") as trainer:
            await trainer.send(scripted_run("run-young", epochs=4, finish=False)[:1])  # run_started alone
            app = console(url, run_id="run-young", charts=True)
            async with app.run_test(size=(100, 30)) as pilot:
                screen = await until(pilot, lambda: isinstance(app.screen, ChartScreen) and app.screen, "charts")
                await until(pilot, lambda: "run-young" in screen.runs, "run found, stream open")
                acc = panel(screen, "accuracy")
                steps = []
                for i in range(3):
                    trainer.step += 10
                    steps.append(trainer.step)
                    await trainer.send([trainer.event(EpochCompleted(accuracy=0.1 * i, val_loss=1.0), env=1)])
                await until(pilot, lambda: [t.x for t in acc.shown] == [steps], "each point once, in order")
                assert acc.shown[0].label_text == "env=1"


async def test_a_chart_being_removed_is_not_drawn(tmp_path: Path):
    # Its plot goes before the panel leaves the screen; a redraw in between (the timer's) must skip it.
    log = write_run_log(tmp_path / "r" / "events.jsonl")
    app = build_app(WatchConfig(client=None, replay_file=log, charts=True, refresh_hz=20))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await until(pilot, lambda: isinstance(app.screen, ChartScreen) and app.screen, "charts")
        doomed = panel(screen, "accuracy")
        await until(pilot, lambda: doomed.shown, "accuracy drawn")
        doomed.focus()
        screen.action_remove_chart()
        while doomed in screen.panels:
            screen.redraw(force=True)
            await asyncio.sleep(0)
        assert "accuracy" not in [p.spec.title for p in screen.panels]


async def test_a_chart_added_while_its_runs_markers_are_read_gets_its_history(tmp_path: Path, monkeypatch):
    # The markers' read is held (the test's gate in front of the real client) while a chart is added: the read
    # in progress must take the new chart's series too, since the add found it running and left it to it.
    gate, holding = asyncio.Event(), asyncio.Event()
    markers = NissaClient.markers

    async def held(self, run_id):
        holding.set()
        await gate.wait()
        return await markers(self, run_id)

    monkeypatch.setattr(NissaClient, "markers", held)
    with running_server(tmp_path) as url:
        async with scripted_trainer(url, "run-held") as trainer:
            await trainer.send(scripted_run("run-held", epochs=4, finish=True))
        app = console(url, run_id="run-held", charts=True)
        async with app.run_test(size=(100, 30)) as pilot:
            screen = await until(pilot, lambda: isinstance(app.screen, ChartScreen) and app.screen, "charts")
            await until(pilot, lambda: holding.is_set(), "the series read, the markers' read begun")
            added = screen.add_chart(ChartSpec.of_name("epoch_completed.val_loss"))
            await pilot.pause()
            gate.set()
            await until(pilot, lambda: added.shown, "the added chart drawn")
