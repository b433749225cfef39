"""Replay of a local run log with the Pilot: stepping, epochs, scrubbing with the mouse, filter, help, quit."""

from textual.widgets import Input

from tui.screens.forms import HelpScreen
from tui.screens.replay import ReplayScreen, Scrubber
from tui.widgets.event_log import EventLog

SIZE = (120, 40)


async def test_replay_steps_and_scrubs(replay_app):
    async with replay_app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = replay_app.screen
        assert isinstance(screen, ReplayScreen)
        total = len(screen.events)
        assert screen.position == total and screen.state.status == "finished"

        await pilot.press("left", "left")
        assert screen.position == total - 2
        assert screen.state.status != "finished"  # run_finished is the last event: now unseen
        await pilot.press("right")
        assert screen.position == total - 1

        await pilot.press("home")
        assert screen.position == 0 and screen.state.events_total == 0
        await pilot.press("right_square_bracket")
        assert screen.position == 1  # epoch 0 is the run's start
        await pilot.press("right_square_bracket")
        first_epoch_end = screen.position
        assert screen.state.epoch == 1 and screen.events[first_epoch_end].epoch == 2
        await pilot.press("right_square_bracket")
        assert screen.state.epoch == 2
        await pilot.press("left_square_bracket")
        assert screen.position == first_epoch_end

        bar = screen.query_one(Scrubber)
        await pilot.click(Scrubber, offset=(bar.size.width - 2, 0))
        assert screen.position > total * 0.9
        await pilot.click(Scrubber, offset=(bar.size.width // 2 + 10, 0))
        assert 0.2 * total < screen.position < 0.9 * total
        # Going back re-folds from the start: the state equals a fresh fold of the prefix.
        assert screen.state.events_total == screen.position


async def test_filter_help_and_quit(replay_app):
    async with replay_app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        log = replay_app.screen.query_one(EventLog)
        everything = log.shown
        await pilot.press("slash")
        box = replay_app.screen.query_one("#filter", Input)
        assert box.has_focus
        await pilot.press(*"kind:ppo")
        assert 0 < log.shown < everything and log.shown == 6
        await pilot.press("enter", "escape")
        assert log.shown == everything and box.value == ""

        await pilot.press("question_mark")
        assert isinstance(replay_app.screen, HelpScreen)
        await pilot.press("escape")
        assert isinstance(replay_app.screen, ReplayScreen)
        await pilot.press("q")
    assert replay_app.return_code == 0
