"""The console's sweep view against a real server with a token, holding a sweep whose two trials an agent leased
(one of them a live run): ``S`` from the runs table lists the sweeps, enter opens one (the server's view: a row per
trial, the parameters as columns); ``x`` stops the trial under the cursor through its run and ``X`` the sweep,
each only after a yes."""

from __future__ import annotations

import json

import httpx

from tests.support.server import running_server
from tests.tui.live_console import console, until
from tests.tui.producer import scripted_trainer
from tests.tui.scenario import scripted_run
from tui.screens.forms import ConfirmStop
from tui.screens.sweep_parallel import SweepParallelScreen
from tui.screens.sweeps import SweepScreen, SweepsScreen

TOKEN = "sweep-view-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SPEC = {"name": "console-grid", "method": "grid", "trials": 2, "parallel": 2, "command": ["python", "loop.py"],
        "metric": {"name": "val_loss"}, "parameters": {"lr": {"values": [0.001, 0.01]}, "momentum": {"values": [0.9]},
                                                       "opt": {"values": ["[b]bold[/b]"]}}}
"""The sweep's values hold markup (a control character is refused as the sweep is created)."""


def _stops(url: str, run_id: str) -> list[dict]:
    commands = httpx.get(f"{url}/runs/{run_id}/commands", headers=AUTH, timeout=30).json()
    return [c for c in commands if c["action"] == "stop"]


async def test_sweeps_listed_opened_and_stopped_from_the_console(tmp_path):
    with running_server(tmp_path, token=TOKEN) as url:
        sweep_id = httpx.post(f"{url}/sweeps", content=json.dumps(SPEC), headers=AUTH, timeout=30).json()["sweep_id"]
        leased = httpx.post(f"{url}/sweeps/{sweep_id}/lease", json={"agent": "host-1", "slots": 2}, headers=AUTH,
                            timeout=30).json()
        run_1 = next(t["run_id"] for t in leased["trials"] if t["trial_id"] == 1)
        async with scripted_trainer(url, run_1, token=TOKEN) as trainer:
            await trainer.send(scripted_run(run_1, epochs=1, finish=False))
            app = console(url, token=TOKEN)
            async with app.run_test(size=(140, 40)) as pilot:
                await until(pilot, lambda: app.screen.__class__.__name__ == "RunPickerScreen", "runs table")
                await pilot.press("S")
                listing = await until(pilot, lambda: isinstance(app.screen, SweepsScreen) and app.screen.sweeps
                                      and app.screen, "sweeps listed")
                assert [s.sweep_id for s in listing.sweeps] == [sweep_id]
                await pilot.press("enter")
                screen = await until(pilot, lambda: isinstance(app.screen, SweepScreen) and app.screen.view
                                     and app.screen, "sweep view")
                assert screen.view.columns == ["lr", "momentum", "opt"]
                cells = [str(table_cell) for table_cell in screen.query_one("#sweep-trials").get_column_at(4)]
                assert any("[b]bold[/b]" in c for c in cells), cells  # as text, not markup
                assert [(t.trial_id, t.status) for t in screen.view.trials] == [(1, "running"), (2, "running")]
                table = screen.query_one("#sweep-trials")
                heads = [str(c.label) for c in table.columns.values()]
                assert table.row_count == 2 and heads[2:4] == ["lr", "momentum"], heads

                await pilot.press("p")
                parallel = await until(pilot, lambda: isinstance(app.screen, SweepParallelScreen) and app.screen,
                                       "parallel coordinates")
                axes = str(parallel.query_one("#parallel-axes").render())
                assert [a.name for a in parallel.view.axes] == ["lr", "momentum", "opt", "val_loss"], axes
                assert "lr [" in axes and len(parallel.view.lines) == 2
                await pilot.press("escape")
                await until(pilot, lambda: app.screen is screen, "back to the sweep")

                await pilot.press("x")
                await until(pilot, lambda: isinstance(app.screen, ConfirmStop), "asked first")
                await pilot.press("n")
                await until(pilot, lambda: app.screen is screen, "back, nothing sent")
                assert _stops(url, run_1) == []
                await pilot.press("x")
                await until(pilot, lambda: isinstance(app.screen, ConfirmStop), "asked again")
                await pilot.press("y")
                stops = await until(pilot, lambda: _stops(url, run_1), "the trial's run asked to stop")
                assert stops[0]["request"]["reason"] == "stopped from the console's sweep view"

                await pilot.press("X")
                await until(pilot, lambda: isinstance(app.screen, ConfirmStop), "asked before the sweep")
                await pilot.press("y")
                await until(pilot, lambda: screen.view is not None and screen.view.status == "stopped",
                            "the sweep stopped", timeout=60)
                reply = httpx.get(f"{url}/sweeps/{sweep_id}", headers=AUTH, timeout=30).json()
                assert reply["status"] == "stopped"
