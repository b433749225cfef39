"""The safety net in the console: a hang alert's banner and the alerts list (``a``), every rank's stacks
(``t``), a hung rank marked in the ranks panel, and a profile form that asks for shapes, stacks, memory."""

from __future__ import annotations

from leyline import AlertChanged, CommandAction, Heartbeat, make_event
from leyline.commands import ProfileRequest
from nissa_server.alerts.rules import parse_rules
from tests.tui.live_console import live_run, run_view, until
from tui.screens.diagnostics import AlertsScreen, StacksScreen
from tui.screens.forms import EscalateForm
from tui.state import RunState

RULES = parse_rules({"rules": [{"name": "stuck", "when": "hang", "after_s": 1.0}]}, "alerts.toml")


async def test_a_hang_alert_shows_a_banner_and_the_stacks_of_the_run(tmp_path):
    async with (live_run(tmp_path, "run-h", alert_rules=RULES, maintenance_interval_s=0.2) as (url, trainer),
                run_view(url, "run-h") as (app, pilot, view)):
        for _ in range(100):  # alive (heartbeats), never a step further
            await trainer.emit(Heartbeat(uptime_s=1.0))
            await pilot.pause(0.3)
            if view.state.alerts.firing:
                break
        await pilot.pause(0.5)
        banner = view.query_one("#alert-banner")
        assert banner.has_class("-shown") and "ALERT stuck: rank 0 has not advanced" in str(banner.render())
        assert any(c.action is CommandAction.STACKS for c in trainer.commands)  # asked by the server

        await pilot.press("a")
        listed = await until(pilot, lambda: isinstance(app.screen, AlertsScreen) and app.screen, "alerts")
        assert [(a.rule, a.state, a.subject) for a in listed.alerts] == [("stuck", "firing", "rank 0")]
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is view, "back")

        await pilot.press("t")
        shown = await until(pilot, lambda: isinstance(app.screen, StacksScreen) and app.screen, "stacks")
        ((title, text),) = shown.texts()
        assert title == "rank 0: 1 threads" and "in _collective" in text
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is view, "back")

        await pilot.press("p")
        form = await until(pilot, lambda: isinstance(app.screen, EscalateForm) and app.screen, "form")
        await pilot.click("#record_shapes")
        await pilot.click("#profile_memory")
        await pilot.click("#ok")
        await until(pilot, lambda: any(c.action is CommandAction.PROFILE for c in trainer.commands), "sent")
        profile = next(c.request for c in trainer.commands if c.action is CommandAction.PROFILE)
        assert isinstance(profile, ProfileRequest)
        assert (profile.record_shapes, profile.with_stack, profile.profile_memory) == (True, False, True)
        assert form.is_attached is False


def test_a_firing_hang_marks_its_rank_and_a_resolved_one_clears_it():
    state = RunState("r")

    def alert(seq: int, state_: str) -> None:
        state.apply(make_event(AlertChanged(alert_id="a1", rule="stuck", condition="hang", state=state_,  # type: ignore[arg-type]
                                            subject="rank 1", message="m", rank=1), run_id="r", seq=seq, ts=1.0 + seq,
                               rank=-1, step=0, epoch=0))
    alert(1, "firing")
    assert state.alerts.hung_ranks() == {1} and state.alerts.banner().startswith("ALERT stuck: m")
    alert(2, "resolved")
    assert state.alerts.hung_ranks() == frozenset() and state.alerts.banner() == ""
