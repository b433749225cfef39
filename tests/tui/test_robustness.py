"""The console under faults: a cut connection resumes from its cursor; a 10,000-event burst stays bounded."""

from __future__ import annotations

import itertools

from leyline import EventKind, Heartbeat
from leyline.kinds import SERVER_ONLY_KINDS
from leyline.samples import SAMPLE_PAYLOADS
from tests.support.server import running_server
from tests.tui.live_console import SIZE, console, until
from tests.tui.producer import scripted_trainer
from tests.tui.proxy import cuttable_proxy
from tui.screens.forms import HelpScreen
from tui.screens.run_view import RunViewScreen
from tui.widgets.dashboard import RunDashboard
from tui.widgets.event_log import EventLog


async def test_cut_connection_resumes_from_the_cursor_with_no_gap(tmp_path):
    with running_server(tmp_path) as url:
        async with cuttable_proxy(url) as (proxy, proxied), scripted_trainer(url, "run-cut") as trainer:
            await trainer.emit(*(Heartbeat(uptime_s=float(i)) for i in range(100)))
            app = console(proxied, run_id="run-cut")
            async with app.run_test(size=SIZE) as pilot:
                view = await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen, "view")
                await until(pilot, lambda: view.state.events_total == 100, "first hundred")
                for _ in range(2):
                    proxy.cut()
                    await trainer.emit(*(Heartbeat(uptime_s=float(i)) for i in range(100)))
                    await until(pilot, lambda: view.state.events_total == trainer.seq, "events after the cut")
                    await until(pilot, lambda: view.connection.state == "connected", "reconnected")
                assert view.reconnects >= 2 and proxy.connections >= 3
                # Resumed after its cursor: nothing missed, nothing delivered twice.
                assert view.state.gaps == 0 and view.state.duplicates == 0
                assert view.state.last_seq[0] == 300


def _storm_payloads():
    skip = {EventKind.RUN_FINISHED, EventKind.RUN_STARTED, *SERVER_ONLY_KINDS}  # the server refuses those
    return itertools.cycle([p for k, p in SAMPLE_PAYLOADS.items() if k not in skip])


async def test_ten_thousand_event_burst_stays_responsive_and_bounded(tmp_path):
    with running_server(tmp_path) as url:
        async with scripted_trainer(url, "run-storm") as trainer:
            await trainer.emit(SAMPLE_PAYLOADS[EventKind.RUN_STARTED])
            app = console(url, run_id="run-storm", refresh_hz=10.0, max_inflight_events=1000)
            async with app.run_test(size=SIZE) as pilot:
                view = await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen, "view")
                await until(pilot, lambda: view.connection.state == "connected", "connected")
                payloads = _storm_payloads()
                burst = [trainer.event(next(payloads), env=i % 4) for i in range(10_000)]
                await trainer.send(burst, batch=1000)
                await until(pilot, lambda: view.state.events_total == trainer.seq, "the whole burst", timeout=90)

                state, limits = view.state, app.config.limits
                assert state.gaps == 0 and state.duplicates == 0
                assert len(state.log) == limits.log_lines
                assert len(state.ppo) <= limits.history and len(state.lstm) <= limits.history
                assert all(len(s) <= limits.history for s in state.grad.values())
                assert all(len(v.accuracy) <= limits.history for v in state.envs.values())
                assert len(state.timeline) <= limits.timeline and len(state.anomalies) <= limits.anomalies
                assert len(state.commands) <= limits.commands
                log = view.query_one(EventLog)
                assert len(log.lines) <= limits.log_lines
                # Drawn by the timer, not per event: far fewer renders than events.
                renders = view.query_one(RunDashboard).renders
                assert 0 < renders * 50 < len(burst), renders
                assert view._inflight == 0

                # Still answering keys right after the storm.
                await pilot.press("question_mark")
                await until(pilot, lambda: isinstance(app.screen, HelpScreen), "help after the burst")
                await pilot.press("escape", "slash", *"kind:ppo", "enter")
                await until(pilot, lambda: 0 < log.shown <= limits.log_lines, "filtered log")
                assert all("ppo" in str(line.text) or "round" in str(line.text) for line in log.lines)
