"""Charts of a plain loop's run (the nissa client: ``run.log`` values, no Esper kinds), alone and beside
an Esper run, through a real server: its own metrics first, no empty Esper panels, NaN counted."""

from __future__ import annotations

import math

from textual.widgets import Static

import nissa
from leyline.charts import DEFAULT_CHARTS
from tests.support.server import running_server
from tests.tui.live_console import console, until
from tests.tui.producer import scripted_trainer
from tests.tui.scenario import scripted_run
from tui.app import build_app
from tui.config import WatchConfig
from tui.screens.charts import ChartScreen
from tui.widgets.chart import ChartPanel


def title(panel: ChartPanel) -> str:
    return str(panel.query_one(".chart-title", Static).render())


def shown(screen: ChartScreen) -> list[str]:
    return [p.spec.title for p in screen.panels if p.display]


async def test_a_plain_run_beside_an_esper_run_and_alone(tmp_path):
    with running_server(tmp_path) as url:
        async with scripted_trainer(url, "esper-a") as trainer:
            await trainer.send(scripted_run("esper-a", epochs=4, envs=2))
        run = nissa.init(server=url, run_name="plain", log_dir=tmp_path / "runs", system_metrics=False)
        try:
            for i in range(6):
                run.step()
                run.log({"loss": math.nan if i == 3 else 1.0 / (i + 1), "lr": 0.1})
            run.runtime.hub.flush(10)
            app = console(url, compare=("esper-a", run.run_id))
            async with app.run_test(size=(160, 50)) as pilot:
                screen = await until(pilot, lambda: isinstance(app.screen, ChartScreen) and app.screen, "charts")
                await until(pilot, lambda: shown(screen)[:3] == ["loss", "lr", "accuracy"], "its own metrics first")
                loss, acc = screen.panels[0], screen.panels[2]
                await until(pilot, lambda: "not in cifar-esper" in title(loss), "the run without it named")
                assert [len(t.x) for t in loss.shown] == [6] and "1 NaN/inf" in title(loss)
                await until(pilot, lambda: {t.run_id for t in acc.shown} == {"esper-a"}, "Esper's accuracy")
                # Two tracks of one run: each named by its labels, not both by the run alone.
                await until(pilot, lambda: "cifar-esper env=0" in title(acc) and "cifar-esper env=1" in title(acc),
                            "each env of the run named")
                # Markers are read after a run's series: waited for, not assumed drawn with them.
                await until(pilot, lambda: acc.markers_shown, "Esper's markers on its chart")
                assert not [m for m in loss.markers_shown if m.label != "completed"]

                screen.panels[1].focus()
                await pilot.press("backspace")  # lr removed: it stays so
                run.step()
                run.log({"loss": 0.1, "val_loss": 0.2})  # a metric that first appears live gets its chart
                run.runtime.hub.flush(10)
                await until(pilot, lambda: shown(screen)[:3] == ["loss", "val_loss", "accuracy"], "val_loss charted")
                await until(pilot, lambda: [len(t.x) for t in screen.panels[1].shown] == [1], "its point")

            app = console(url, run_id=run.run_id, charts=True)
            async with app.run_test(size=(100, 30)) as pilot:
                screen = await until(pilot, lambda: isinstance(app.screen, ChartScreen) and app.screen, "charts")
                await until(pilot, lambda: shown(screen) == ["loss", "lr", "val_loss"], "no empty Esper panels")
                assert not any(p.display for p in screen.panels if p.spec in DEFAULT_CHARTS)
                assert screen.focused is screen.panels[0]
                await pilot.press("x", "x")  # step → epoch → round: a plain loop has no round
                assert screen.view.axis == "round"
                await until(pilot, lambda: "has a round" in title(screen.panels[0]), "says so")
        finally:
            run.finish()
    # Its local run log, without a server: the same charts.
    app = build_app(WatchConfig(client=None, replay_file=tmp_path / "runs" / run.run_id / "events.jsonl", charts=True))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await until(pilot, lambda: isinstance(app.screen, ChartScreen) and app.screen, "charts")
        await until(pilot, lambda: shown(screen) == ["loss", "lr", "val_loss"], "its own metrics, from its log")
        assert "1 NaN/inf" in title(screen.panels[0])
