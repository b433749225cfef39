"""Escape pressed at once on every screen that reads from the server: the screen goes, its read lands on
nothing, and the console keeps running (a read that came back to a screen half removed once stopped the
console: ``NoMatches("No nodes match '#bands' on DistributionPanel()")``)."""

from __future__ import annotations

import pytest
import torch

import nissa
from tests.support.server import running_server
from tests.tui.live_console import console, until
from tui.screens.charts import ChartScreen
from tui.screens.config_diff import ConfigDiffScreen
from tui.screens.distributions import DistributionScreen
from tui.screens.group_charts import GroupChartScreen
from tui.screens.replay import ReplayScreen
from tui.screens.run_picker import RunPickerScreen
from tui.screens.run_view import RunViewScreen

SCREENS = {
    "distributions": lambda runs: DistributionScreen(runs[0]),
    "group charts": lambda runs: GroupChartScreen("group", "g", runs),
    "config diff": lambda runs: ConfigDiffScreen(runs),
    "charts": lambda runs: ChartScreen(runs),
    "run view": lambda runs: RunViewScreen(runs[0]),
    "replay": lambda runs: ReplayScreen(runs[0]),
}


def _runs(url, log_dir) -> list[str]:
    ids = []
    for lr in (0.1, 0.2):
        run = nissa.init(server=url, run_name=f"lr{lr}", log_dir=log_dir, system_metrics=False, group="g",
                         config={"lr": lr})
        for i in range(4):
            run.step()
            run.log({"loss": lr / (i + 1), **{f"h{k}": nissa.Histogram(torch.arange(50.0) * (i + 1), bins=8)
                                              for k in range(12)}})
        assert run.finish().complete
        ids.append(run.run_id)
    return ids


@pytest.mark.parametrize("rounds", [3])
async def test_escape_at_once_on_every_screen_that_loads(tmp_path, rounds):
    with running_server(tmp_path) as url:
        runs = _runs(url, tmp_path / "runs")
        app = console(url)
        async with app.run_test(size=(160, 50)) as pilot:
            picker = await until(pilot, lambda: isinstance(app.screen, RunPickerScreen) and app.screen, "runs")
            for name, make in SCREENS.items():
                for _ in range(rounds):
                    screen = make(runs)
                    app.push_screen(screen)
                    await pilot.press("escape")
                    if app.screen is screen:  # escape is that screen's own (the run view's log filter)
                        app.pop_screen()
                    for _ in range(10):
                        await pilot.pause(0.02)
                    assert app._exception is None, f"{name}: {app._exception!r}"
                    assert app.is_running and app.screen is picker, name
