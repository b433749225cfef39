"""The console's runs table against a real server holding a stored sweep (three learning rates, two seeds
each, one group): the server sorts and filters, group rows with mean ± SD open into their runs, a group's
band charts, the diff of three configs, editing tags through PATCH (with the server's token)."""

from __future__ import annotations

import statistics

import httpx
import pytest
from textual.widgets import Input

from tests.support.server import running_server
from tests.support.sweep import SweepRun, lr_sweep, store_runs
from tests.tui.live_console import console, until
from tui.runs_query import value_id
from tui.screens.config_diff import ConfigDiffScreen
from tui.screens.group_charts import GroupChartScreen
from tui.screens.run_edit import RunEditScreen
from tui.screens.run_picker import GROUP_ROW, RunPickerScreen

TOKEN = "sweep-token"
SPECS = [*lr_sweep(), SweepRun("other [b]not bold[/b]", 0.5, project="mnist", steps=3)]


def _best(spec: SweepRun) -> float:
    return min(spec.val_loss(step) for step in range(spec.steps))


@pytest.fixture
def sweep(tmp_path):
    with running_server(tmp_path, token=TOKEN) as url:
        yield url, store_runs(url, SPECS, token=TOKEN)


async def _picker(pilot, app) -> RunPickerScreen:
    picker = await until(pilot, lambda: isinstance(app.screen, RunPickerScreen) and app.screen, "picker")
    await until(pilot, lambda: len(picker.order) == len(SPECS), "every run listed")
    return picker


async def _sort_by(pilot, picker: RunPickerScreen, key: str) -> None:
    """``s``, the column's name, enter: one choice, whatever the column's place (once 7 presses of ``s``)."""
    await pilot.press("s", *key, "enter")
    await until(pilot, lambda: picker.sort_key == key, f"sorted by {key}")


async def test_sort_and_filter_are_the_servers(sweep):
    url, ids = sweep
    app = console(url, token=TOKEN)
    async with app.run_test(size=(160, 50)) as pilot:
        picker = await _picker(pilot, app)
        assert {"loss.best", "val_loss.best", "config.lr", "config.seed"} <= {c.key for c in picker._columns}
        await _sort_by(pilot, picker, "val_loss.best")
        ranked = [ids[s.name] for s in sorted(SPECS, key=_best)]
        await until(pilot, lambda: picker.order == ranked, "lowest best val_loss first")
        await pilot.press("s", "down", "down", "enter")  # another column, picked from the list
        await until(pilot, lambda: picker.sort_key not in ("", "val_loss.best"), "another column")
        picker.on_data_table_header_selected(type("H", (), {"column_key": type("K", (), {"value": "val_loss.best"})})())
        await pilot.press("b")
        await until(pilot, lambda: picker.sort_key == "val_loss.last" and "val_loss.last" in
                    {c.key for c in picker._columns}, "last values")
        await pilot.press("slash", *"config.lr>=0.01 project:cifar", "enter")
        await until(pilot, lambda: len(picker.order) == 4, "filtered by the server")
        assert picker.data.total == 4
        await pilot.press("slash")
        box = picker.query_one("#runs-filter", Input)
        box.value = "config.lr>="
        await pilot.press("enter")
        await until(pilot, lambda: picker.error is not None, "a mistake named")
        await pilot.press("escape")
        await until(pilot, lambda: len(picker.order) == len(SPECS), "filter cleared")


async def test_group_rows_bands_diff_and_edit(sweep):
    url, ids = sweep
    app = console(url, token=TOKEN)
    async with app.run_test(size=(160, 50)) as pilot:
        picker = await _picker(pilot, app)
        for _ in range(4):  # runs → group → project → config.lr
            await pilot.press("u")
            if picker.query_state.group_by == "config.lr":
                break
        await until(pilot, lambda: picker.data.groups is not None and picker.data.groups.by == "config.lr", "grouped")
        rows = {g.value: g for g in picker.data.groups.groups}
        assert sorted(rows) == [0.001, 0.01, 0.1, 0.5] and rows[0.01].count == 2
        bests = [_best(s) for s in SPECS if s.lr == 0.01]
        stats = rows[0.01].metrics["val_loss.best"]
        assert stats.mean == pytest.approx(statistics.fmean(bests))
        assert stats.sd == pytest.approx(statistics.stdev(bests))
        key = GROUP_ROW + value_id(0.01)
        picker.table.move_cursor(row=picker.order.index(key))
        await pilot.press("enter")
        members = {ids[s.name] for s in SPECS if s.lr == 0.01}
        await until(pilot, lambda: set(picker.order) - {k for k in picker.order if k.startswith(GROUP_ROW)} == members,
                    "the group's runs under it")
        picker.table.move_cursor(row=picker.order.index(key))
        await pilot.press("g")
        charts = await until(pilot, lambda: isinstance(app.screen, GroupChartScreen) and app.screen, "group charts")
        await until(pilot, lambda: len(charts.panels) == 2 and all(p.bands for p in charts.panels), "bands drawn")
        band = next(p for p in charts.panels if p.series_name == "val_loss").bands[0]
        assert set(band.n) == {2} and band.min[-1] < band.mean[-1] < band.max[-1]
        await pilot.press("escape")

        await until(pilot, lambda: app.screen is picker, "back")
        for _ in range(4):
            await pilot.press("u")
            if picker.query_state.group_by is None:
                break
        await until(pilot, lambda: picker.data.groups is None and len(picker.order) == len(SPECS), "runs again")
        three = [ids[s.name] for s in SPECS if s.seed == 0 and s.project == "cifar"]
        picker.selected = set(three)
        await pilot.press("equals_sign")
        diff = await until(pilot, lambda: isinstance(app.screen, ConfigDiffScreen) and app.screen.diff and app.screen,
                           "diff of three")
        assert sorted(diff.diff.runs) == sorted(three) and [r.key for r in diff.diff.rows] == ["lr"]
        await pilot.press("escape")

        target = ids["lr0.1-s0"]
        picker.table.move_cursor(row=picker.order.index(target))
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, RunEditScreen), "the form")
        app.screen.query_one("#edit-tags", Input).value = "best, baseline"
        app.screen.query_one("#edit-notes", Input).focus()
        await pilot.press(*"lr 0.1 won", "enter")
        await until(pilot, lambda: picker.runs.get(target) and picker.runs[target].notes == "lr 0.1 won", "saved")
        async with httpx.AsyncClient() as http:
            run = (await http.get(f"{url}/runs/{target}")).json()
        assert run["notes"] == "lr 0.1 won" and run["tags"] == ["best", "baseline"]
        other = picker.table.get_row(ids[SPECS[-1].name])
        assert "[b]not bold[/b]" in "".join(getattr(c, "plain", str(c)) for c in other), "a run's name is text"


def test_grouped_table_snapshot(snap_compare, tmp_path):
    with running_server(tmp_path) as url:
        store_runs(url, SPECS)
        app = console(url)

        async def grouped(pilot):
            picker = await _picker(pilot, app)
            for _ in range(4):
                await pilot.press("u")
                if picker.query_state.group_by == "config.lr":
                    break
            await until(pilot, lambda: picker.data.groups is not None and picker.data.groups.by == "config.lr",
                        "grouped")
            await pilot.press("down")

        assert snap_compare(app, terminal_size=(120, 30), run_before=grouped)
