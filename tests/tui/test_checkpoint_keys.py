"""``c`` asks a live run for a checkpoint, ``S`` stops it only once confirmed (a real server, a scripted trainer)."""

from __future__ import annotations

from leyline import CommandAction
from tests.tui.live_console import live_run, run_view, until
from tui.screens.forms import HELP, ConfirmStop, HelpScreen


async def test_checkpoint_key_and_a_confirmed_stop(tmp_path):
    async with live_run(tmp_path, "run-c", epochs=2) as (url, trainer), run_view(url, "run-c") as (app, pilot, view):
        await pilot.press("c")
        await until(pilot, lambda: trainer.commands, "checkpoint delivered")
        assert trainer.commands[0].action is CommandAction.CHECKPOINT

        await pilot.press("S")
        await until(pilot, lambda: isinstance(app.screen, ConfirmStop), "stop asks first")
        await pilot.press("n")
        await until(pilot, lambda: app.screen is view, "back without stopping")
        await pilot.press("S")
        await until(pilot, lambda: isinstance(app.screen, ConfirmStop), "asked again")
        await pilot.press("y")
        await until(pilot, lambda: len(trainer.commands) == 2, "stop delivered")
        assert [c.action for c in trainer.commands] == [CommandAction.CHECKPOINT, CommandAction.STOP]
        issued = {c.action for c in view.state.commands.values()}
        assert {CommandAction.CHECKPOINT, CommandAction.STOP} <= issued

        footer = {key for key, active in view.active_bindings.items() if active.binding.show}
        assert {"c", "S"} <= footer and {"c", "S"} <= {key for key, _ in HELP}
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
