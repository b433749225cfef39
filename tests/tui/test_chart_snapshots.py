"""Snapshots of the chart view from scripted runs' local logs (deterministic), at 100×30 and 160×50.

Update after an intended change with ``pytest tests/tui/test_chart_snapshots.py --snapshot-update``
and look at the SVGs in ``__snapshots__`` before committing them.
"""

from __future__ import annotations

from tests.tui.conftest import write_run_log
from tests.tui.live_console import until
from tests.tui.scenario import scripted_run
from tui.app import EsperWatch, build_app
from tui.config import WatchConfig
from tui.screens.charts import ChartScreen


def _drawn(screen: ChartScreen) -> bool:
    return all(p.ready for p in screen.panels) and bool(screen.panels[0].shown)


async def _open(pilot, runs: dict) -> None:
    await pilot.app.push_screen(ChartScreen(list(runs), runs))
    await until(pilot, lambda: isinstance(pilot.app.screen, ChartScreen) and _drawn(pilot.app.screen), "drawn")
    pilot.app.screen.redraw(force=True)
    await pilot.pause()


def _app(tmp_path) -> EsperWatch:
    return build_app(WatchConfig(client=None, replay_file=write_run_log(tmp_path / "r" / "events.jsonl")))


def test_charts_100x30(snap_compare, tmp_path):
    async def run_before(pilot):
        await _open(pilot, {"demo-run": scripted_run()})

    assert snap_compare(_app(tmp_path), terminal_size=(100, 30), run_before=run_before)


def test_charts_160x50(snap_compare, tmp_path):
    async def run_before(pilot):
        await _open(pilot, {"demo-run": scripted_run()})

    assert snap_compare(_app(tmp_path), terminal_size=(160, 50), run_before=run_before)


def test_compare_two_runs_160x50(snap_compare, tmp_path):
    async def run_before(pilot):
        await _open(pilot, {"run-a": scripted_run("run-a", seed=1), "run-b": scripted_run("run-b", seed=2)})
        await pilot.press("l")  # env=0 of each run
        pilot.app.screen.redraw(force=True)
        await pilot.pause()

    assert snap_compare(_app(tmp_path), terminal_size=(160, 50), run_before=run_before)
