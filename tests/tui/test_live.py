"""esper-watch against a real nissa-server on 127.0.0.1:0, fed by a scripted trainer on /ws/ingest."""

from __future__ import annotations

from textual.widgets import DataTable

from leyline import CommandStatus, Heartbeat, ProfileRequest, TelemetryLevel
from tests.support.clock import ManualClock
from tests.support.server import running_server
from tests.tui.live_console import SIZE, console, until
from tests.tui.producer import scripted_trainer
from tests.tui.scenario import scripted_run
from tui.screens.forms import EscalateForm
from tui.screens.replay import ReplayScreen
from tui.screens.run_picker import RunPickerScreen
from tui.screens.run_view import RunViewScreen
from tui.views import StaleThresholds
from tui.widgets.event_log import EventLog
from tui.widgets.header import RunHeader
from tui.widgets.lifecycle import CommandPanel


async def test_live_run_from_the_picker_with_a_debug_window(tmp_path):
    with running_server(tmp_path) as url:
        async with scripted_trainer(url, "run-live") as trainer:
            await trainer.send(scripted_run("run-live", epochs=4, finish=False))
            clock = ManualClock()
            app = console(url, clock)
            async with app.run_test(size=SIZE) as pilot:
                picker = await until(pilot, lambda: isinstance(app.screen, RunPickerScreen) and app.screen, "picker")
                await until(pilot, lambda: "run-live" in picker.runs, "run listed")
                await pilot.press("enter")
                view = await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen, "run view")
                await until(pilot, lambda: view.state.events_total == trainer.seq, "replayed events")

                header = view.query_one(RunHeader)
                await until(pilot, lambda: header.view and header.view.connection == "connected", "header")
                assert header.view.run_id == "run-live" and header.view.status == "live"
                assert header.view.epoch == 4 and header.view.staleness == "LIVE"
                # Silence is read on the console's clock: SLOW past 5 s, STALE past 15 s, LIVE at the next event.
                for advance, shown in ((4.9, "LIVE"), (0.1, "SLOW"), (9.9, "SLOW"), (0.1, "STALE")):
                    clock.advance(advance)
                    view.render_tick()
                    assert header.view.staleness == shown, (clock.now, shown)

                # Live events arrive after the replay, in the log too.
                await trainer.emit(Heartbeat(uptime_s=99.0))
                await until(pilot, lambda: view.state.events_total == trainer.seq, "a live event")
                await until(pilot, lambda: header.view.staleness == "LIVE", "LIVE again at the next event")
                log = view.query_one(EventLog)
                await until(pilot, lambda: any("alive 99s" in str(line.text) for line in log.lines), "log line")

                # d: POST /escalate, the trainer applies it, the console follows every status.
                await pilot.press("d")
                await until(pilot, lambda: trainer.commands, "command delivered to the trainer")
                command = trainer.commands[0]
                assert command.action.value == "debug" and command.request.epochs == app.config.debug_epochs
                await until(pilot, lambda: command.command_id in view.state.commands
                            and view.state.commands[command.command_id].status is CommandStatus.COMPLETED,
                            "command completed")
                seen = [s for s, _ in view.state.commands[command.command_id].history]
                assert seen == [CommandStatus.QUEUED, CommandStatus.DELIVERED, CommandStatus.APPLIED,
                                CommandStatus.COMPLETED]
                assert view.state.commands[command.command_id].applied_step is not None
                levels = [line.text for line in view.state.log if line.kind.value == "telemetry_level_changed"]
                assert "NORMAL → DEBUG" in levels[-2] and "DEBUG → NORMAL" in levels[-1]
                assert view.state.level is TelemetryLevel.NORMAL
                await until(pilot, lambda: view.query_one(CommandPanel).rows
                            and view.query_one(CommandPanel).rows[0].status is CommandStatus.COMPLETED,
                            "command panel shows completed")
                assert view.state.gaps == 0 and view.state.duplicates == 0


async def test_profile_form_and_refusals_are_shown(tmp_path):
    with running_server(tmp_path, max_open_commands=2) as url:
        async with scripted_trainer(url, "run-p", answer_commands=False) as trainer:
            await trainer.send(scripted_run("run-p", epochs=1, finish=False))
            app = console(url, run_id="run-p")
            notes: list[tuple[str, str]] = []
            async with app.run_test(size=SIZE, notifications=True) as pilot:
                app.notify = lambda message, *, title="", severity="information", **kw: notes.append((title, message))  # type: ignore[method-assign]
                view = await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen, "view")
                await pilot.press("p")
                form = await until(pilot, lambda: isinstance(app.screen, EscalateForm) and app.screen, "form")
                await pilot.press(*["backspace"] * 3, *"999", "enter")  # past the bound: the form says so
                assert isinstance(app.screen, EscalateForm)
                assert str(form.query_one("#error").render()).strip()
                await pilot.press(*["backspace"] * 3, "7")
                await pilot.click("#ok")  # the mouse works in the form too
                await until(pilot, lambda: not isinstance(app.screen, EscalateForm), "form closed")
                await until(pilot, lambda: trainer.commands, "profile command delivered")
                assert trainer.commands[0].request == ProfileRequest(run_id="run-p", batches=7, reason="esper-watch")

                await pilot.press("d")  # the second open command: still accepted
                await until(pilot, lambda: len(view.state.commands) == 2, "second command")
                await pilot.press("d")  # the third: 429 from the server, shown
                await until(pilot, lambda: any(t == "HTTP 429" for t, _ in notes), "429 shown")
            assert len(view.state.commands) == 2


async def test_unknown_and_finished_runs_are_refused_visibly(tmp_path):
    with running_server(tmp_path) as url:
        async with scripted_trainer(url, "run-done") as trainer:
            await trainer.send(scripted_run("run-done", epochs=2, finish=True))
        app = console(url, run_id="no-such-run")
        notes: list[str] = []
        async with app.run_test(size=SIZE) as pilot:
            app.notify = lambda message, *, title="", **kw: notes.append(title)  # type: ignore[method-assign]
            await until(pilot, lambda: isinstance(app.screen, RunViewScreen), "view")
            await pilot.press("d")
            await until(pilot, lambda: "HTTP 404" in notes, "HTTP 404 shown")
        app = console(url, run_id="run-done")
        async with app.run_test(size=SIZE) as pilot:  # a finished run: the footer offers no command at all
            view = await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen, "view")
            await until(pilot, lambda: view.state.status == "finished", "finished")
            await until(pilot, lambda: not {"d", "p", "c", "S"} & set(view.active_bindings), "commands gone")
            await pilot.press("S")
            assert app.screen is view and not view.state.commands


async def test_token_is_sent_and_its_absence_reported(tmp_path):
    with running_server(tmp_path, token="s3cret") as url:
        async with scripted_trainer(url, "run-t", token="s3cret") as trainer:
            await trainer.send(scripted_run("run-t", epochs=1, finish=False))
            for token, expect_ok in ((None, False), ("s3cret", True)):
                await _press_debug_with_token(url, trainer, token, expect_ok)


async def _press_debug_with_token(url, trainer, token, expect_ok):
    app = console(url, run_id="run-t", token=token)
    notes: list[str] = []
    async with app.run_test(size=SIZE) as pilot:
        app.notify = lambda message, *, title="", **kw: notes.append(title)  # type: ignore[method-assign]
        view = await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen, "view")
        header = view.query_one(RunHeader)
        # The header says up front whether commands will be taken, before any is tried.
        await until(pilot, lambda: header.view and header.view.token_refused is not expect_ok, "header")
        await pilot.press("d")
        if expect_ok:
            await until(pilot, lambda: trainer.commands, "command reached the trainer")
            await until(pilot, lambda: any(c.status is CommandStatus.COMPLETED
                                           for c in view.state.commands.values()), "completed")
        else:
            await until(pilot, lambda: "HTTP 401" in notes, "401 shown")


def _middle_of(table: DataTable, key: str) -> int:
    """The x of the middle of column ``key``'s header, as the table is drawn now (widths follow the rows: a
    header's edge moves as rows come and go, its middle stays inside it)."""
    left = 0
    for column_key, column in table.columns.items():
        width = column.get_render_width(table)
        if str(column_key.value) == key:
            return left + width // 2
        left += width
    raise KeyError(key)


async def test_finished_run_opens_as_a_replay(tmp_path):
    with running_server(tmp_path) as url:
        events = scripted_run("run-old", epochs=6, finish=True)
        async with scripted_trainer(url, "run-old") as trainer:
            await trainer.send(events)
        async with scripted_trainer(url, "run-new") as trainer:
            await trainer.send(scripted_run("run-new", epochs=1, finish=False))
            app = console(url)
            async with app.run_test(size=SIZE) as pilot:
                picker = await until(pilot, lambda: isinstance(app.screen, RunPickerScreen) and app.screen, "picker")
                await until(pilot, lambda: {"run-old", "run-new"} <= set(picker.runs)
                            and picker.runs["run-old"].status == "finished", "both runs")
                assert picker.selected_run().run_id == "run-new"  # live runs sort first
                table = picker.query_one(DataTable)
                keys = [str(k.value) for k in table.columns]
                await pilot.click(DataTable, offset=(_middle_of(table, "id"), 0))  # the "run" header: by run id
                await pilot.pause()
                await pilot.click(DataTable, offset=(_middle_of(table, "id"), 0))  # again: reversed
                assert picker.sort_key == "id" and picker.sort_reverse
                await until(pilot, lambda: str(table.get_row_at(0)[keys.index("id")]) == "run-old",
                            "sorted by the server")
                await pilot.press("s", *"name", "enter")  # a column chosen by its name
                await until(pilot, lambda: picker.sort_key == "name" and not picker.sort_reverse, "by name")
                table.move_cursor(row=table.get_row_index("run-old"))
                await pilot.press("enter")
                replay = await until(pilot, lambda: isinstance(app.screen, ReplayScreen) and app.screen, "replay")
                await until(pilot, lambda: replay.events, "stored events loaded")
                assert len(replay.events) == len(events)
                assert replay.position == len(events) and replay.state.status == "finished"
                await pilot.press("left_square_bracket")
                assert replay.state.epoch == 5 and replay.state.status == "live"
                await pilot.press("r")
                assert app.screen is picker


async def test_a_silent_run_shows_lost_and_stale(tmp_path):
    with running_server(tmp_path, lost_after_s=1.0, maintenance_interval_s=0.1) as url:
        app = console(url, run_id="run-gone", stale=StaleThresholds(slow_s=0.2, stale_s=0.5))
        async with scripted_trainer(url, "run-gone") as trainer:
            await trainer.send(scripted_run("run-gone", epochs=1, finish=False))
            async with app.run_test(size=SIZE) as pilot:
                view = await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen, "view")
                header = view.query_one(RunHeader)
                await until(pilot, lambda: header.view and header.view.status == "live", "live")
                await trainer.ws.close()  # the trainer vanishes without run_finished
                await until(pilot, lambda: header.view.status == "lost", "lost", timeout=60)
                await until(pilot, lambda: header.view.staleness == "LOST", "the badge agrees with the status")


async def test_d_in_the_picker_escalates_the_selected_run(tmp_path):
    with running_server(tmp_path) as url:
        async with scripted_trainer(url, "run-pick") as trainer:
            await trainer.send(scripted_run("run-pick", epochs=1, finish=False))
            app = console(url)
            async with app.run_test(size=SIZE) as pilot:
                picker = await until(pilot, lambda: isinstance(app.screen, RunPickerScreen) and app.screen, "picker")
                await until(pilot, lambda: "run-pick" in picker.runs, "run listed")
                await pilot.press("d")
                view = await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen, "view")
                assert view.run_id == "run-pick"
                await until(pilot, lambda: trainer.commands, "command reached the trainer")
                await until(pilot,
                            lambda: any(c.status is CommandStatus.COMPLETED for c in view.state.commands.values()),
                            "completed in view")
