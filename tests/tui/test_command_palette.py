"""The command palette (ctrl+p) opens on the run view: the screen's list of command actions is not taken for
the palette's providers (Textual's ``Screen.COMMANDS``)."""

from __future__ import annotations

from textual.command import CommandPalette

from tests.tui.live_console import live_run, run_view, until


async def test_the_command_palette_opens_on_the_run_view(tmp_path):
    async with live_run(tmp_path, "run-p") as (url, _), run_view(url, "run-p") as (app, pilot, view):
        await pilot.press("ctrl+p")
        palette = await until(pilot, lambda: isinstance(app.screen, CommandPalette) and app.screen, "palette")
        await pilot.press("q", "u", "i")
        await pilot.pause(0.5)
        assert palette.is_attached
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is view, "back")
