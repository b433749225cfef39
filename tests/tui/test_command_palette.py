"""The command palette (ctrl+p) opens on the run view: the screen's list of command actions is not taken for
the palette's providers (Textual's ``Screen.COMMANDS``)."""

from __future__ import annotations

from textual.command import CommandPalette

from tests.support.server import running_server
from tests.tui.producer import scripted_trainer
from tests.tui.scenario import scripted_run
from tests.tui.test_live import SIZE, console, until
from tui.screens.run_view import RunViewScreen


async def test_the_command_palette_opens_on_the_run_view(tmp_path):
    with running_server(tmp_path) as url:
        async with scripted_trainer(url, "run-p") as trainer:
            await trainer.send(scripted_run("run-p", epochs=1, finish=False))
            app = console(url, run_id="run-p")
            async with app.run_test(size=SIZE) as pilot:
                view = await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen, "view")
                await pilot.press("ctrl+p")
                palette = await until(pilot, lambda: isinstance(app.screen, CommandPalette) and app.screen, "palette")
                await pilot.press("q", "u", "i")
                await pilot.pause(0.5)
                assert palette.is_attached
                await pilot.press("escape")
                await until(pilot, lambda: app.screen is view, "back")
