"""Snapshots of the main screens from a scripted run replayed from its local log (deterministic).

Update after an intended change with ``pytest tests/tui/test_snapshots.py --snapshot-update``
and look at the SVGs in ``__snapshots__`` before committing them.
"""

from textual.widgets import Input

from leyline import CommandAction
from tui.screens.forms import EscalateForm

SIZE = (120, 40)


def test_run_view(snap_compare, replay_app):
    assert snap_compare(replay_app, terminal_size=SIZE)


def test_run_view_mid_run_during_debug_window(snap_compare, replay_app):
    # Twelve epochs back from the end: the auto-escalated DEBUG window is open.
    assert snap_compare(replay_app, terminal_size=SIZE, press=["left_square_bracket"] * 11)


def test_event_log_filter(snap_compare, replay_app):
    async def type_filter(pilot):
        await pilot.press("slash")
        box = pilot.app.screen.query_one("#filter", Input)
        box.cursor_blink = False
        await pilot.press(*"kind:seed !epoch")
        await pilot.press("enter")

    assert snap_compare(replay_app, terminal_size=SIZE, run_before=type_filter)


def test_help(snap_compare, replay_app):
    assert snap_compare(replay_app, terminal_size=SIZE, press=["question_mark"])


def test_profile_form(snap_compare, replay_app):
    async def open_form(pilot):
        await pilot.app.push_screen(EscalateForm("run-1", CommandAction.PROFILE, 5))
        pilot.app.screen.query_one("#amount", Input).cursor_blink = False
        await pilot.press("backspace", *"900", "enter")  # out of bounds: the form says why

    assert snap_compare(replay_app, terminal_size=SIZE, run_before=open_form)


def test_debug_form_through_update(snap_compare, replay_app):
    async def open_form(pilot):
        await pilot.app.push_screen(EscalateForm("run-1", CommandAction.DEBUG, 3))
        box = pilot.app.screen.query_one("#amount", Input)
        box.cursor_blink = False
        await pilot.click("#through_update")
        box.focus()
        await pilot.press("backspace")  # ticked, epochs empty: a valid request, nothing marked wrong

    assert snap_compare(replay_app, terminal_size=SIZE, run_before=open_form)
