"""The edit form ``e`` on a run whose notes, group and tags hold escape sequences (a window title, an OSC 52
clipboard write, a clear-screen) and a right-to-left override, as a server of before the PATCH rule stored
them: the terminal is sent none of them (no ESC but Textual's own colour and cursor sequences, no BEL, no
bidi override), the form shows them as visible text, and saving another field leaves the notes as stored."""

from __future__ import annotations

import sqlite3

import httpx

from leyline import RunStarted, make_event
from tests.support import IngestClient
from tests.support.hostile import control_characters
from tests.support.server import running_server
from tests.tui.live_console import console, until
from tests.tui.test_hostile_text import terminal
from tui.screens.run_edit import RunEditScreen
from tui.screens.run_picker import RunPickerScreen

NOTES = "\u202etxt.exe\u2066 \x1b]0;pwned\x07 \x1b]52;c;cHduZWQ=\x07 \x1b[2J\x1b[H \x07"
SENT = ("\x1b]0;", "\x1b]52;", "\x1b[2J", "\u202e", "\u2066", "\x07")


async def test_the_edit_form_shows_hostile_notes_as_text(tmp_path):
    db = tmp_path / "nissa.db"
    with running_server(tmp_path, db_path=db) as url:
        async with IngestClient(url, "r-notes") as client:
            await client.send([make_event(RunStarted(name="noted", config={}), run_id="r-notes", seq=1, ts=1.7e9)])
            await client.wait_ack(1)
    with sqlite3.connect(db) as conn:  # as PATCH stored them before it scrubbed its texts
        conn.execute("UPDATE runs SET notes = ?", (NOTES,))
    with running_server(tmp_path, db_path=db) as url:
        app = console(url)
        async with app.run_test(size=(120, 40)) as pilot:
            picker = await until(pilot, lambda: isinstance(app.screen, RunPickerScreen) and app.screen, "runs")
            await until(pilot, lambda: picker.table.row_count == 1, "the run listed")
            await pilot.press("e")
            form = await until(pilot, lambda: isinstance(app.screen, RunEditScreen) and app.screen, "edit form")
            await pilot.pause()
            drawn = terminal(app)
            assert "pwned" in drawn and "txt.exe" in drawn, "the notes are on screen"
            assert [s for s in SENT if s in drawn] == [], "a sequence of the notes reached the terminal"
            assert control_characters(drawn) == []
            await pilot.press("end")  # the cursor through the notes: the field redraws them
            await pilot.pause()
            assert control_characters(terminal(app)) == []

            form.query_one("#edit-tags").value = "kept"
            form.query_one("#edit-notes").focus()
            await pilot.press("enter")
            await until(pilot, lambda: app.screen is picker, "saved")
        async with httpx.AsyncClient() as http:
            run = (await http.get(f"{url}/runs/r-notes")).json()
    assert run["tags"] == ["kept"] and run["notes"] == NOTES, "a field not edited is not sent"
