"""The console never interprets what a run wrote. A run whose every text (its name, config keys and values,
command help, labels, series names, messages, results, alerts) carries console markup (``[/]``, ``[@click=…]``
actions, ``[link=…]``), terminal sequences (OSC 52, OSC 8, CSI clear-screen, window titles, a C1 CSI) and HTML is
opened on every screen: runs table and its edit form, config diff, charts and their series picker, the live run
view, its alerts, forms and stacks, the replay of a local run log and its charts. On each: the console did not
crash, no action ran (the screenshot a click action would write is not there, the app still runs), no click action
or hyperlink from the run is on screen, and what Textual would write to the terminal holds no control character
of the run's.

Through a server, control characters are stored as U+FFFD; the store is then rewritten as a server of before that
rule may have left it (control characters back in names, configs and events, a run started at ts 1e300), so that
the console's own defence is what is tested."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.app import App
from textual.widgets import DataTable

from leyline import CommandAction, CommandStatus, encode_event
from leyline.commands import CommandRecord
from tests.support.hostile import MARKER, as_stored_long_ago, candidates, control_characters, hostile_events
from tests.support.server import running_server
from tests.tui.live_console import console, until
from tests.tui.producer import scripted_trainer
from tui.app import build_app
from tui.config import WatchConfig
from tui.screens.call_form import CallForm
from tui.screens.charts import ChartScreen
from tui.screens.config_diff import ConfigDiffScreen
from tui.screens.diagnostics import AlertsScreen, StacksScreen
from tui.screens.forms import ConfirmStop, EscalateForm
from tui.screens.replay import ReplayScreen
from tui.screens.run_edit import RunEditScreen
from tui.screens.run_picker import RunPickerScreen
from tui.screens.run_view import RunViewScreen
from tui.screens.series_picker import SeriesPicker

SIZE = (160, 50)


@pytest.fixture
def click_dir() -> Iterator[Path]:
    """Where a click action the console ran would write its screenshot (short: it is inside the run's texts)."""
    path = Path(tempfile.mkdtemp(prefix="nissa-click-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def terminal(app: App) -> str:
    """What Textual's driver would write to the terminal for the whole screen now (``App._display`` writes the
    same update's segments)."""
    return app.screen._compositor.render_update(full=True).render_segments(app.console)


def interpreted(app: App) -> list[str]:
    """Click actions and hyperlinks on screen that a run's text made (they name ``MARKER`` or quit)."""
    found = []
    for line in app.screen._compositor.render_update(full=True).strips:
        for strip in line:
            for segment in strip:
                style = segment.style
                if style is None:
                    continue
                click = str((style.meta or {}).get("@click", ""))
                if MARKER in click or "quit" in click or "screenshot" in click:
                    found.append(f"click {click!r} on {segment.text!r}")
                if style.link and (MARKER in style.link or "evil" in style.link):
                    found.append(f"link {style.link!r} on {segment.text!r}")
    return found


async def check(pilot, app: App, click_dir: Path, where: str) -> None:
    """The screen as drawn now: nothing a run wrote was acted on."""
    await pilot.pause()
    assert app.is_running, f"{where}: the console stopped"
    assert interpreted(app) == [], where
    assert control_characters(terminal(app)) == [], where
    assert list(click_dir.iterdir()) == [], f"{where}: a click action ran"


async def click_all_over(pilot, app: App, click_dir: Path, where: str, rows: range) -> None:
    """Click along ``rows`` of a screen that navigates nowhere on a click (its text is the run's)."""
    width = app.screen.size.width
    for y in rows:
        for x in range(2, width - 2, 19):
            await pilot.click(offset=(x, y))
    await check(pilot, app, click_dir, f"{where}, clicked")


@pytest.fixture
async def hostile_store(tmp_path, click_dir) -> Path:
    """A store of two hostile runs, ``evil-done`` (finished) and ``evil-live``, rewritten as a server of before
    the ingest rules may have left it: control characters in their texts, starts at ts 8.7e12 and 1e300."""
    db = tmp_path / "nissa.db"
    with running_server(tmp_path, db_path=db) as url:
        for run_id, finish in (("evil-done", True), ("evil-live", False)):
            async with scripted_trainer(url, run_id) as trainer:
                await trainer.send(hostile_events(run_id, click_dir, server_alerts=False, finish=finish))
    as_stored_long_ago(db, {"evil-live": 1e300, "evil-done": 8.7e12})
    return db


async def _picker(pilot, app: App) -> RunPickerScreen:
    picker = await until(pilot, lambda: isinstance(app.screen, RunPickerScreen) and app.screen, "runs table")
    await until(pilot, lambda: len(picker.runs) == 2 and picker.table.row_count == 2, "runs listed")
    return picker


@pytest.mark.timeout(300)  # several screens, on a busy machine
async def test_the_runs_table_config_diff_overlay_and_replay_of_hostile_runs(tmp_path, click_dir, hostile_store):
    with running_server(tmp_path, db_path=hostile_store) as url:
        app = console(url)
        async with app.run_test(size=SIZE) as pilot:
            picker = await _picker(pilot, app)
            await check(pilot, app, click_dir, "runs table")
            await pilot.click(DataTable, offset=(30, 0))  # a header: the run's config keys are columns
            await check(pilot, app, click_dir, "runs table sorted")
            await pilot.press("e")  # its name and notes, to edit
            await until(pilot, lambda: isinstance(app.screen, RunEditScreen), "edit form")
            await check(pilot, app, click_dir, "edit form")
            await pilot.press("escape")
            await until(pilot, lambda: app.screen is picker, "edit form closed")

            await pilot.press("space", "down", "space", "equals_sign")
            diff = await until(pilot, lambda: isinstance(app.screen, ConfigDiffScreen) and app.screen.diff
                               is not None and app.screen, "config diff")
            assert diff.diff.rows, "the two runs' configs differ"
            await check(pilot, app, click_dir, "config diff")
            await pilot.press("escape")

            await pilot.press("c")
            charts = await until(pilot, lambda: isinstance(app.screen, ChartScreen) and app.screen, "overlay")
            await until(pilot, lambda: any(p.shown for p in charts.panels), "a chart drawn")
            await check(pilot, app, click_dir, "charts of both runs")
            await click_all_over(pilot, app, click_dir, "charts of both runs", range(0, 2))
            await pilot.press("a")
            await until(pilot, lambda: isinstance(app.screen, SeriesPicker), "series picker")
            await check(pilot, app, click_dir, "series picker")
            await pilot.press("escape", "escape")

            picker = await _picker(pilot, app)
            picker.table.move_cursor(row=picker.order.index("evil-done"))
            await pilot.press("v")
            replay = await until(pilot, lambda: isinstance(app.screen, ReplayScreen) and app.screen.events
                                 and app.screen, "replay")
            await pilot.press("end")
            await until(pilot, lambda: replay.position == len(replay.events), "replayed to its end")
            await check(pilot, app, click_dir, "replay from the server")
        assert app.return_code in (None, 0)


@pytest.mark.timeout(300)
async def test_the_live_view_of_a_hostile_run_its_forms_alerts_stacks_and_charts(tmp_path, click_dir, hostile_store):
    with running_server(tmp_path, db_path=hostile_store) as url:
        async with scripted_trainer(url, "evil-live"):  # back, so that the run takes commands
            app = console(url, run_id="evil-live")
            async with app.run_test(size=SIZE) as pilot:
                view = await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen, "run view")
                await until(pilot, lambda: view.state.events_total >= 30 and view.state.status == "live", "its events")
                await check(pilot, app, click_dir, "run view")
                await click_all_over(pilot, app, click_dir, "run view", range(0, 4))
                for key, screen in (("x", CallForm), ("p", EscalateForm), ("S", ConfirmStop), ("a", AlertsScreen)):
                    await pilot.press(key)
                    await until(pilot, lambda screen=screen: isinstance(app.screen, screen), screen.__name__)
                    await check(pilot, app, click_dir, screen.__name__)
                    await pilot.press("escape")
                    await until(pilot, lambda: app.screen is view, f"{screen.__name__} closed")

                text = candidates(click_dir)[0]
                record = CommandRecord(command_id="c", run_id="evil-live", action=CommandAction.STACKS,
                                       status=CommandStatus.COMPLETED, created_at=1.7e9, updated_at=1.7e9,
                                       applied_step=1, result={"threads": text, "stacks": f"{text}\n{text}"})
                await app.push_screen(StacksScreen(record))
                await check(pilot, app, click_dir, "stacks")
                await pilot.press("escape")

                await pilot.press("g")
                await until(pilot, lambda: isinstance(app.screen, ChartScreen) and any(
                    p.shown for p in app.screen.panels), "charts of the live run")
                await check(pilot, app, click_dir, "charts of the live run")
            assert app.return_code in (None, 0)


async def test_a_hostile_run_log_replayed_with_its_alerts_and_charts(tmp_path, click_dir):
    events = hostile_events("evil-log", click_dir, finish=True, ts0=1e300)  # a log holds whatever was written
    log = tmp_path / "evil-log" / "events.jsonl"
    log.parent.mkdir()
    log.write_bytes(b"".join(encode_event(e) + b"\n" for e in events))
    app = build_app(WatchConfig(client=None, replay_file=log))
    async with app.run_test(size=SIZE) as pilot:
        replay = await until(pilot, lambda: isinstance(app.screen, ReplayScreen) and app.screen, "replay")
        await pilot.press("end")
        await until(pilot, lambda: replay.position == len(events), "replayed to its end")
        assert replay.state.alerts.firing, "the server's alerts, from the log"
        await check(pilot, app, click_dir, "replay of a run log")
        await click_all_over(pilot, app, click_dir, "replay of a run log", range(0, 6))
        await app.push_screen(AlertsScreen(list(replay.state.alerts.alerts.values())))  # a replay has no key for it
        await check(pilot, app, click_dir, "alerts of a run log")
        await pilot.press("escape", "g")
        charts = await until(pilot, lambda: isinstance(app.screen, ChartScreen) and app.screen, "charts")
        await until(pilot, lambda: any(p.shown for p in charts.panels), "a chart drawn")
        await check(pilot, app, click_dir, "charts of a run log")
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, SeriesPicker), "series picker")
        await check(pilot, app, click_dir, "series picker of a run log")
