"""The debug form's "through the next PPO update" option: what the form returns, and what reaches the server."""

from __future__ import annotations

import httpx
import pytest
from textual.widgets import Checkbox, Input, Static

from leyline import CommandAction, CommandStatus, DebugRequest, EscalateRequest, ProfileRequest
from tests.tui.live_console import SIZE, live_run, run_view, until
from tui.app import EsperWatch
from tui.client import ClientConfig, NissaClient
from tui.screens.forms import PROFILE_UPDATE, EscalateForm


async def _fill_form(app: EsperWatch, action: CommandAction, amount: str | None,
                     tick: bool) -> EscalateRequest | None:
    """Open the form over the app, type ``amount`` (None: keep the default), tick the box if asked,
    press enter; returns what the form dismissed with."""
    results: list[EscalateRequest | None] = []
    async with app.run_test(size=SIZE) as pilot:
        await app.push_screen(EscalateForm("r", action, 5), results.append)
        form = await until(pilot, lambda: isinstance(app.screen, EscalateForm) and app.screen, "form")
        if tick:
            await pilot.click("#through_update")
            await until(pilot, lambda: form.query_one("#through_update", Checkbox).value, "box ticked")
            form.query_one("#amount", Input).focus()
        if amount is not None:
            await pilot.press("backspace", *amount)
        await pilot.press("enter")
        await until(pilot, lambda: results, "form dismissed")
        assert app.screen is not form
    return results[0]


@pytest.mark.parametrize(("amount", "tick", "expected"), [
    (None, False, DebugRequest(run_id="r", epochs=5)),   # the default length, as before
    ("12", False, DebugRequest(run_id="r", epochs=12)),
    ("3", True, DebugRequest(run_id="r", epochs=3, through_update=True)),  # the epochs and the update
    ("", True, DebugRequest(run_id="r", through_update=True)),  # the update alone: epochs may be left empty
])
async def test_debug_form_returns_the_choice(replay_app, amount, tick, expected):
    choice = await _fill_form(replay_app, CommandAction.DEBUG, amount, tick)
    assert choice == expected


async def test_debug_form_without_epochs_or_the_box_says_why_and_stays(replay_app):
    results: list[EscalateRequest | None] = []
    async with replay_app.run_test(size=SIZE) as pilot:
        await replay_app.push_screen(EscalateForm("r", CommandAction.DEBUG, 5), results.append)
        form = await until(pilot, lambda: isinstance(replay_app.screen, EscalateForm) and replay_app.screen, "form")
        await pilot.press("backspace", "enter")
        await pilot.pause()
        assert replay_app.screen is form and not results
        error = str(form.query_one("#error", Static).render())
        assert "epochs" in error and "through the next PPO update" in error
        # Ticking the box makes the empty length acceptable.
        await pilot.click("#through_update")
        await until(pilot, lambda: form.query_one("#through_update", Checkbox).value, "box ticked")
        await until(pilot, lambda: form.query_one("#amount", Input).is_valid, "empty epochs no longer marked wrong")
        await pilot.click("#ok")
        await until(pilot, lambda: results, "form dismissed")
    assert results == [DebugRequest(run_id="r", through_update=True)]


async def test_profile_form_returns_batches_and_refuses_an_empty_length(replay_app):
    results: list[EscalateRequest | None] = []
    async with replay_app.run_test(size=SIZE) as pilot:
        await replay_app.push_screen(EscalateForm("r", CommandAction.PROFILE, 5), results.append)
        form = await until(pilot, lambda: isinstance(replay_app.screen, EscalateForm) and replay_app.screen, "form")
        assert str(form.query_one("#through_update", Checkbox).label) == PROFILE_UPDATE
        await pilot.press("backspace", "enter")  # an empty length is never enough for a batches window
        await pilot.pause()
        assert replay_app.screen is form and not results
        assert str(form.query_one("#error", Static).render()).strip()
        await pilot.press("7", "enter")
        await until(pilot, lambda: results, "form dismissed")
    assert results == [ProfileRequest(run_id="r", batches=7)]


async def test_profile_form_with_the_box_ticked_asks_for_the_next_update(replay_app):
    choice = await _fill_form(replay_app, CommandAction.PROFILE, "", True)
    assert choice == ProfileRequest(run_id="r", target="update")


async def test_p_with_the_box_ticked_profiles_the_next_update(tmp_path):
    async with live_run(tmp_path, "run-prof") as (url, trainer):
        async with run_view(url, "run-prof") as (app, pilot, view):
            await pilot.press("p")
            form = await until(pilot, lambda: isinstance(app.screen, EscalateForm) and app.screen, "form")
            await pilot.click("#through_update")
            await until(pilot, lambda: form.query_one("#through_update", Checkbox).value, "box ticked")
            await pilot.click("#ok")
            await until(pilot, lambda: view.state.commands, "command issued")
            await until(pilot, lambda: trainer.commands, "command delivered to the trainer")
        command = trainer.commands[0]
        request = command.request
        assert isinstance(request, ProfileRequest) and request.target == "update" and request.batches is None


@pytest.mark.parametrize(("typed", "epochs"), [("", None), ("2", 2)])
async def test_shift_d_with_the_box_ticked_records_through_update(tmp_path, typed, epochs):
    async with live_run(tmp_path, "run-upd") as (url, trainer):
        async with run_view(url, "run-upd") as (app, pilot, view):
            notes: list[str] = []
            app.notify = lambda message, **kw: notes.append(message)  # type: ignore[method-assign]
            await pilot.press("D")
            form = await until(pilot, lambda: isinstance(app.screen, EscalateForm) and app.screen, "form")
            await pilot.click("#through_update")
            await until(pilot, lambda: form.query_one("#through_update", Checkbox).value, "box ticked")
            form.query_one("#amount", Input).value = typed
            await pilot.click("#ok")
            await until(pilot, lambda: view.state.commands, "command issued")
            command_id = next(iter(view.state.commands))
            await until(pilot, lambda: view.state.commands[command_id].status is CommandStatus.COMPLETED,
                        "command followed to completed")
            assert any("through the next PPO update" in n and command_id in n for n in notes)

        # What the server recorded, in its own words and as the console's client reads it.
        async with httpx.AsyncClient(base_url=url) as http:
            body = (await http.get(f"/commands/{command_id}")).json()
        asked = body["request"]
        assert body["action"] == "debug" and asked["through_update"] is True and asked.get("epochs") == epochs
        client = NissaClient(ClientConfig(url))
        try:
            record = await client.command(command_id)
        finally:
            await client.aclose()
        expected = DebugRequest(run_id="run-upd", epochs=epochs, through_update=True, reason="esper-watch")
        assert record.request == expected and trainer.commands[0].request == expected
