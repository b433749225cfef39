"""esper-watch on a plain loop's run (the nissa client, no Esper kinds): its metrics and commands instead of
empty Esper panels, and one of its own commands called with ``x``."""

from __future__ import annotations

import nissa
from leyline import CommandStatus
from tests.support.server import running_server
from tests.tui.live_console import SIZE, console, until
from tui.screens.run_view import RunViewScreen
from tui.widgets.dashboard import RunDashboard
from tui.widgets.loop import LoopPanel


async def test_a_plain_run_shows_its_metrics_and_takes_its_own_command(tmp_path):
    applied: list[float] = []
    with running_server(tmp_path) as url:
        run = nissa.init(server=url, run_name="plain", log_dir=tmp_path / "runs")

        @run.command("set_lr", help="Set the learning rate")
        def set_lr(value: float) -> dict:
            applied.append(value)
            return {"lr": value}

        run.step()
        run.log({"loss": 0.25, "lr": 0.1})
        run.runtime.hub.flush(10)
        app = console(url)
        try:
            async with app.run_test(size=SIZE) as pilot:
                await until(pilot, lambda: run.run_id in getattr(app.screen, "runs", {}), "run listed")
                await pilot.press("enter")
                view = await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen, "run view")
                panel = view.query_one(LoopPanel)
                await until(pilot, lambda: ("loss", "0.25", "0") in panel.rows, "the run's metrics")
                dashboard = view.query_one(RunDashboard)
                assert dashboard.has_class("-plain") and panel.display
                assert not view.query_one("#envs").display and not view.query_one("#ppo").display
                assert panel.offered == ("set_lr value:float — Set the learning rate",)

                await pilot.press("x")
                await pilot.press(*"value=0.01", "enter")

                def done() -> bool:
                    run.step()  # the loop goes on: the command applies at a step boundary
                    calls = [c for c in view.state.commands.values() if c.status is CommandStatus.COMPLETED]
                    return bool(calls)

                await until(pilot, done, "the call completed")
                assert applied == [0.01]
        finally:
            run.finish()
