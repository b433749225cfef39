"""Snapshots of ``esper-watch`` at 100×30 and 160×50 on a plain loop's run (the nissa client: its own metrics,
its own phase, no Esper kinds) replayed from its local log: its run view, its charts and its forms (profile,
debug, stop); and an Esper run's run view and a heuristic run's charts at the same sizes.

Update after an intended change with ``pytest tests/tui/test_plain_snapshots.py --snapshot-update`` and look at
the SVGs in ``__snapshots__`` before committing them.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from textual.widgets import Input

from leyline import CommandAction, Event, Metrics, RunFinished, RunStarted, encode_event, make_event
from tests.tui.conftest import write_run_log
from tests.tui.live_console import until
from tests.tui.scenario import scripted_run
from tests.tui.test_chart_views import heuristic_run
from tui.app import build_app
from tui.config import WatchConfig
from tui.screens.charts import ChartScreen
from tui.screens.forms import ConfirmStop, EscalateForm

SIZES = [(100, 30), (160, 50)]
RUN = "mnist-plain-0001"


def plain_run(steps: int = 400, per_epoch: int = 100) -> list[Event]:
    """A loop of its own: ``loss`` and ``lr`` each step, ``val.loss`` and ``val_acc`` every 25 steps, a phase
    ``validate``, its summary's headline metric; then it ends."""
    events: list[Event] = []

    def add(payload, step: int) -> None:
        events.append(make_event(payload, run_id=RUN, seq=len(events) + 1, ts=1_750_000_000.0 + step * 0.05,
                                 step=step, epoch=step // per_epoch))

    add(RunStarted(name="mnist-plain", config={"lr": 0.1, "batch_size": 64, "optimizer": "sgd"},
                   summary={"val_acc": "max"}, phases=["validate"]), 0)
    for step in range(1, steps + 1):
        lr = 0.1 if step < 250 else 0.01
        add(Metrics(values={"loss": 2.3 * math.exp(-step / 120) + 0.1 + 0.05 * math.sin(step / 3), "lr": lr}), step)
        if step % 25 == 0:
            add(Metrics(values={"val.loss": 2.2 * math.exp(-step / 150) + 0.15,
                                "val_acc": 0.98 - 0.88 * math.exp(-step / 110)}), step)
    add(RunFinished(status="completed", duration_s=steps * 0.05), steps)
    return events


def _app(tmp_path: Path, events: list[Event]):
    log = tmp_path / RUN / "events.jsonl"
    log.parent.mkdir(parents=True)
    log.write_bytes(b"".join(encode_event(e) + b"\n" for e in events))
    return build_app(WatchConfig(client=None, replay_file=log))


async def _charts(pilot, runs: dict[str, list[Event]]) -> None:
    await pilot.app.push_screen(ChartScreen(list(runs), runs))
    screen = await until(pilot, lambda: isinstance(pilot.app.screen, ChartScreen) and pilot.app.screen, "charts")
    await until(pilot, lambda: all(p.ready for p in screen.panels) and any(p.shown for p in screen.panels), "drawn")
    await pilot.pause()
    screen.redraw(force=True)
    await pilot.pause()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_plain_run_view(snap_compare, tmp_path, size):
    assert snap_compare(_app(tmp_path, plain_run()), terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_plain_run_charts(snap_compare, tmp_path, size):
    async def run_before(pilot):
        await _charts(pilot, {RUN: plain_run()})

    assert snap_compare(_app(tmp_path, plain_run()), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("form", ["profile", "debug", "stop"])
def test_plain_run_forms(snap_compare, tmp_path, size, form):
    async def run_before(pilot):
        await pilot.pause()
        if form == "stop":
            await pilot.app.push_screen(ConfirmStop(RUN, esper=False))
        else:
            action = CommandAction.PROFILE if form == "profile" else CommandAction.DEBUG
            await pilot.app.push_screen(EscalateForm(RUN, action, 5 if form == "profile" else 3, phases=["validate"],
                                                     esper=False))
            pilot.app.screen.query_one("#amount", Input).cursor_blink = False
        await pilot.pause()

    assert snap_compare(_app(tmp_path, plain_run()), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_esper_run_view(snap_compare, tmp_path, size):
    app = build_app(WatchConfig(client=None, replay_file=write_run_log(tmp_path / "demo-run" / "events.jsonl")))
    assert snap_compare(app, terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_heuristic_run_charts(snap_compare, tmp_path, size):
    async def run_before(pilot):
        await _charts(pilot, {"heur-run": heuristic_run()})

    assert snap_compare(_app(tmp_path, scripted_run()), terminal_size=size, run_before=run_before)
