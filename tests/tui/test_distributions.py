"""The console's distributions: a run that logged histograms through the client (``nissa.Histogram``,
``run.watch(model, histograms=…)``) shows each name as one panel, its percentile bands over steps and the
histogram at a chosen step, which ←/→ move; reached from the run's charts with ``d``."""

from __future__ import annotations

import torch
from textual.widgets import Static

import nissa
from tests.support.server import running_server
from tests.tui.live_console import console, until
from tui.screens.charts import ChartScreen
from tui.screens.distributions import DistributionPanel, DistributionScreen


def head(panel: DistributionPanel) -> str:
    return str(panel.query_one(".dist-head", Static).render())


async def test_distributions_over_steps_and_at_a_step(tmp_path):
    with running_server(tmp_path) as url:
        run = nissa.init(server=url, run_name="hist", log_dir=tmp_path / "runs", system_metrics=False)
        model = torch.nn.Linear(4, 3)
        run.watch(model, histograms="parameters", every=1, bins=8)
        try:
            for i in range(10):
                run.step()
                run.log({"loss": 1.0 / (i + 1), "acts": nissa.Histogram(torch.arange(100.0) * (i + 1), bins=10)})
            run.runtime.hub.flush(10)
            app = console(url, run_id=run.run_id, charts=True)
            async with app.run_test(size=(160, 50)) as pilot:
                await until(pilot, lambda: isinstance(app.screen, ChartScreen), "charts")
                await pilot.press("d")
                screen = await until(pilot, lambda: isinstance(app.screen, DistributionScreen) and app.screen,
                                     "distributions")
                await until(pilot, lambda: len(screen.panels) == 3 and all(p.steps for p in screen.panels.values()),
                            "three distributions read")
                assert sorted(screen.panels) == ["acts", "parameters/bias", "parameters/weight"]
                acts = screen.panels["acts"]
                assert [h.step for h in acts.steps] == list(range(10)) and acts.index == 9
                assert head(acts).startswith("step 9  100 values in [0, 990]") and "(10/10" in head(acts)
                acts.focus()
                await pilot.press("left", "left")
                assert acts.index == 7 and head(acts).startswith("step 7  100 values in [0, 792]")
                await pilot.press("home")
                assert acts.index == 0 and acts.steps[0].bins == [10] * 10
                await pilot.press("end")
                assert acts.index == 9
                await pilot.press("escape")
                await until(pilot, lambda: isinstance(app.screen, ChartScreen), "back to the charts")
        finally:
            run.finish()


async def test_every_distribution_is_reachable_a_loops_own_first(tmp_path):
    """Past a page (24 panels) the rest are a ``]`` away, and ``/`` finds one by name; a debug window's
    distributions come after the loop's own, in the order the server gives (the web page's too)."""
    with running_server(tmp_path) as url:
        run = nissa.init(server=url, run_name="many", log_dir=tmp_path / "runs", system_metrics=False)
        try:
            for i in range(2):
                run.step()
                values = torch.arange(10.0) * (i + 1)
                run.log({"zeta": nissa.Histogram(values), "acts": nissa.Histogram(values),
                         **{f"debug/mlp/l{k:02}": nissa.Histogram(values) for k in range(26)}})
            run.runtime.hub.flush(10)
            app = console(url, run_id=run.run_id)
            async with app.run_test(size=(160, 50)) as pilot:
                screen = DistributionScreen(run.run_id)
                app.push_screen(screen)
                await until(pilot, lambda: len(screen.panels) == 24 and all(p.steps for p in screen.panels.values()),
                            "the first page")
                assert list(screen.panels)[:3] == ["acts", "zeta", "debug/mlp/l00"] and screen.total == 28
                await pilot.press("right_square_bracket")
                await until(pilot, lambda: list(screen.panels) == [f"debug/mlp/l{k}" for k in range(22, 26)],
                            "the second page")
                await pilot.press("slash", *"ZETA", "enter")
                await until(pilot, lambda: list(screen.panels) == ["zeta"] and screen.panels["zeta"].steps,
                            "the one the filter names")
                assert screen.total == 1
        finally:
            run.finish()
