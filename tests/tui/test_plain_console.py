"""The run view of a plain loop's run (the nissa client, no Esper kinds) in its own words, through a real
server: its header says step, epoch (when it has its own), steps/s and its headline metrics, never Esper's
rounds or env-epochs; its profile form offers its own phases; its stop confirmation fits at 100x30."""

from __future__ import annotations

import nissa

from tests.support.server import running_server
from tests.tui.test_live import console, until
from tui.screens.run_view import RunViewScreen
from tui.widgets.header import RunHeader


async def open_run(pilot, app, run_id: str) -> RunViewScreen:
    await until(pilot, lambda: run_id in getattr(app.screen, "runs", {}), "run listed")
    await pilot.press("enter")
    return await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen, "run view")


async def test_a_plain_runs_header_speaks_its_own_language(tmp_path):
    with running_server(tmp_path) as url:
        run = nissa.init(server=url, run_name="plain", log_dir=tmp_path / "runs", steps_per_epoch=2,
                         summary={"val_acc": "max"}, system_metrics=False)
        try:
            for i in range(4):
                run.step()
                run.log({"loss": 1.0 / (i + 1), "lr": 0.1, "val_acc": 0.5 + i / 10})
            run.runtime.hub.flush(10)
            app = console(url)
            async with app.run_test(size=(100, 30)) as pilot:
                view = await open_run(pilot, app, run.run_id)
                header = view.query_one(RunHeader)
                await until(pilot, lambda: "val_acc 0.8" in str(header.render()), "its headline metrics")
                text = str(header.render())
                assert "step 4   epoch 1   " in text and "steps/s" in text
                # Its summary's metric first, then the first it logged, each its last value.
                assert "val_acc 0.8   loss 0.25   lr 0.1" in text
                assert "round" not in text and "env-epochs/s" not in text and "telemetry" not in text
        finally:
            run.finish()
