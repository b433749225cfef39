"""A console opened on a run before its trainer registered it waits quietly, as ``make demo`` does it."""

from __future__ import annotations

from tests.support.server import running_server
from tests.tui.live_console import SIZE, console, until
from tests.tui.producer import scripted_trainer
from tests.tui.scenario import scripted_run
from tui.screens.run_view import RunViewScreen
from tui.widgets.header import RunHeader


def _recording(app) -> list[tuple[str, str, str]]:
    notes: list[tuple[str, str, str]] = []
    app.notify = lambda message, *, title="", severity="information", **kw: notes.append((severity, title, message))
    return notes


async def test_a_run_that_appears_late_is_waited_for_without_an_error(tmp_path):
    with running_server(tmp_path) as url:
        app = console(url, run_id="run-late")  # run_wait_s stays long: the run comes well within it
        notes = _recording(app)  # before the app starts: the first poll goes out as the view mounts
        async with app.run_test(size=SIZE) as pilot:
            view = await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen, "view")
            await until(pilot, lambda: view.unknown_polls >= 3, "the server asked, and the run not there yet")
            header = view.query_one(RunHeader)
            assert header.view is not None and header.view.staleness == "WAITING"
            async with scripted_trainer(url, "run-late") as trainer:
                await trainer.send(scripted_run("run-late", epochs=2, finish=False))
                await until(pilot, lambda: header.view.status == "live", "the run, live")
                await until(pilot, lambda: view.state.events_total == trainer.seq, "its events")
            assert notes == []


async def test_a_run_that_never_appears_is_reported_once_as_a_warning(tmp_path):
    with running_server(tmp_path) as url:
        app = console(url, run_id="no-such-run", run_wait_s=0.6)
        notes = _recording(app)
        async with app.run_test(size=SIZE) as pilot:
            view = await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen, "view")
            await until(pilot, lambda: notes, "the console to say the run is still unknown")
            polls = view.unknown_polls
            await until(pilot, lambda: view.unknown_polls >= polls + 5, "more polls")
            assert len(notes) == 1
            severity, title, message = notes[0]
            assert severity == "warning" and "no-such-run" in message and "still waiting" in message
            assert "404" not in title


async def test_a_run_opened_on_a_server_that_does_not_answer_says_so_once(unused_tcp_port):
    app = console(f"http://127.0.0.1:{unused_tcp_port}", run_id="some-run")
    notes = _recording(app)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, RunViewScreen), "view")
        await until(pilot, lambda: notes, "the console to say the server does not answer")
        await pilot.pause(0.5)  # several polls more (0.2 s apart): it is said once
    assert len(notes) == 1
    severity, title, message = notes[0]
    assert (severity, title) == ("error", "server unreachable") and message.startswith("run some-run: cannot reach")
