"""Console charts without surprises, piloted from local run logs: the end marker under its own x in a replay,
no ticks of the old x axis while the new one loads, one colour per run in an overlay (a run's envs as shades
of it) with ``l`` cycling the labels, and an Esper run that hides the charts its policy cannot have, saying
why in one line."""

from __future__ import annotations

from pathlib import Path

import msgspec
from rich.color import Color
from textual.geometry import Region
from textual_plot import PlotWidget

from leyline import Event, RunStarted
from leyline.charts import UNAVAILABLE
from tests.tui.conftest import write_run_log
from tests.tui.live_console import until
from tests.tui.scenario import scripted_run
from tui.app import build_app
from tui.config import WatchConfig
from tui.screens.charts import ChartScreen
from tui.widgets.chart import PALETTE, ChartPanel


def panel(screen: ChartScreen, title: str) -> ChartPanel:
    return next(p for p in screen.panels if p.spec.title == title)


def drawn(widget) -> list[str]:
    """The lines a widget draws at its size now (a plot: those of its canvases, axes and ticks)."""
    parts = list(widget.query("Canvas")) if isinstance(widget, PlotWidget) else [widget]
    return [strip.text for part in parts for strip in part.render_lines(Region(0, 0, *part.size))]


def heuristic_run(run_id: str = "heur-run") -> list[Event]:
    """The scripted Esper run as a heuristic policy runs it: the same config but its policy, no PPO update."""
    events = [e for e in scripted_run(run_id) if e.kind.value != "ppo_update"]
    started = events[0].payload
    assert isinstance(started, RunStarted)
    config = {**started.config, "policy": "heuristic"}
    return [msgspec.structs.replace(events[0], payload=msgspec.structs.replace(started, config=config)), *events[1:]]


async def test_the_end_marker_of_a_replay_sits_under_its_step(tmp_path: Path):
    # Opened from the replay as a person opens it (g), never redrawn by hand: the first draw comes before the
    # layout has given the charts their width.
    app = build_app(WatchConfig(client=None, replay_file=write_run_log(tmp_path / "r" / "events.jsonl")))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("g")
        screen = await until(pilot, lambda: isinstance(app.screen, ChartScreen) and app.screen, "charts")
        acc = panel(screen, "accuracy")
        end = await until(pilot, lambda: next((m for m in acc.markers_shown if m.kind == "end"), None), "end mark")
        await pilot.pause(0.3)
        plot, strip = acc.query_one(PlotWidget), acc.query_one(".chart-markers")
        # The plot's own place for its step (its last x: the plot puts it on its right border, the strip inside).
        where = plot.get_pixel_from_coordinate(end.step, 0.0)[0] + plot.margin_left
        line = drawn(strip)[0]
        assert line.rstrip().endswith("E") and abs(line.index("E") - where) <= 1, (line, where)


async def test_no_ticks_of_the_old_x_axis_while_the_new_one_loads(tmp_path: Path):
    app = build_app(WatchConfig(client=None, replay_file=write_run_log(tmp_path / "r" / "events.jsonl"),
                                charts=True))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await until(pilot, lambda: isinstance(app.screen, ChartScreen) and app.screen, "charts")
        acc = panel(screen, "accuracy")
        await until(pilot, lambda: len(acc.shown) == 4, "drawn")
        await pilot.pause()
        assert any("4k" in line for line in drawn(acc.query_one(PlotWidget))), "the step axis's ticks"
        # What a person sees between ``x`` and the new axis's history: no points, and no ticks at all.
        screen.data.reset("epoch")
        screen.redraw(force=True)
        await pilot.pause()
        assert "no points yet" in str(acc.query_one(".chart-title").render())
        plot = drawn(acc.query_one(PlotWidget))
        assert not any(ch.isdigit() for line in plot for ch in line), plot


async def test_an_overlay_gives_each_run_one_colour_and_l_cycles_labels(tmp_path: Path):
    runs = {"run-a": scripted_run("run-a", seed=1, envs=3), "run-b": scripted_run("run-b", seed=2, envs=3)}
    app = build_app(WatchConfig(client=None, replay_file=write_run_log(tmp_path / "r" / "events.jsonl")))
    async with app.run_test(size=(160, 50)) as pilot:
        await app.push_screen(ChartScreen(list(runs), runs))
        screen = await until(pilot, lambda: isinstance(app.screen, ChartScreen) and app.screen, "charts")
        acc = panel(screen, "accuracy")
        await until(pilot, lambda: len(acc.shown) == 6, "three envs of each run")
        colours = acc.colours

        def rgb(colour: str) -> tuple[int, ...]:
            return tuple(Color.parse(colour).get_truecolor())

        def nearest(colour: str) -> str:  # of the two runs' colours
            return min(PALETTE[:2], key=lambda base: sum((a - b) ** 2 for a, b in zip(rgb(colour), rgb(base),
                                                                                      strict=True)))

        for run, base in (("run-a", PALETTE[0]), ("run-b", PALETTE[1])):
            own = [colours[i] for i, t in enumerate(acc.shown) if t.run_id == run]
            assert len(set(own)) == 3 and base in own, (run, own)  # shades of the run's colour, its own among them
            assert {nearest(c) for c in own} == {base}, (run, own)  # never nearer the other run's colour
        seen = []
        for _ in range(4):
            await pilot.press("l")
            await pilot.pause()
            seen.append(sorted({t.label_text for t in acc.shown}))
        assert seen == [["env=0"], ["env=1"], ["env=2"], ["env=0", "env=1", "env=2"]], seen


async def test_a_heuristic_run_hides_the_charts_it_cannot_have_and_says_why(tmp_path: Path):
    app = build_app(WatchConfig(client=None, replay_file=write_run_log(tmp_path / "r" / "events.jsonl")))
    async with app.run_test(size=(100, 30)) as pilot:
        await app.push_screen(ChartScreen(["heur-run"], {"heur-run": heuristic_run()}))
        screen = await until(pilot, lambda: isinstance(app.screen, ChartScreen) and app.screen, "charts")
        await until(pilot, lambda: panel(screen, "accuracy").shown, "drawn")
        shown = [p.spec.title for p in screen.panels if p.display]
        assert shown == ["accuracy", "env-epochs/s"], shown
        note = screen.query_one("#chart-note")
        assert note.display and str(note.render()) == UNAVAILABLE[0].why
        # Beside a run that has an update, an overlay keeps its charts.
        await pilot.press("escape")
        both = {"heur-run": heuristic_run(), "ppo-run": scripted_run("ppo-run")}
        await app.push_screen(ChartScreen(list(both), both))
        overlay = await until(pilot, lambda: isinstance(app.screen, ChartScreen) and app.screen is not screen
                              and app.screen, "overlay")
        await until(pilot, lambda: panel(overlay, "accuracy").shown, "drawn")
        assert panel(overlay, "policy loss").display and not overlay.query_one("#chart-note").display


def test_a_line_is_named_as_the_page_names_it():
    from leyline.charts import DEFAULT_CHARTS
    from tui.chart_data import Track

    by_title = {c.title: ChartPanel(c) for c in DEFAULT_CHARTS}
    rank0: dict[str, str] = {}  # a run of one rank shows no rank label
    assert by_title["KL"]._short(Track("r", "k", "ppo_update.approx_kl", rank0)) == "KL"
    assert by_title["entropy"]._short(Track("r", "k", "ppo_update.entropy.op", rank0)) == "op"
    assert by_title["accuracy"]._short(Track("r", "k", "epoch_completed.accuracy", {"env": "2", **rank0})) == "env=2"
    cpu = by_title["System · CPU %"]  # two series: each by its full name, never both by the chart's title
    assert [cpu._short(Track("r", "k", n, rank0)) for n in cpu.spec.names] == list(cpu.spec.names)


async def test_a_six_run_overlay_lists_every_run_in_its_legend(tmp_path: Path):
    """A sweep's six runs at 160 columns: the legend wraps onto more lines rather than stopping after two."""
    runs = {f"sweep-lr0.000{i}-seed{i}": scripted_run(f"sweep-lr0.000{i}-seed{i}", seed=i, envs=1) for i in range(6)}
    app = build_app(WatchConfig(client=None, replay_file=write_run_log(tmp_path / "r" / "events.jsonl")))
    async with app.run_test(size=(160, 50)) as pilot:
        await app.push_screen(ChartScreen(list(runs), runs))
        screen = await until(pilot, lambda: isinstance(app.screen, ChartScreen) and app.screen, "charts")
        acc = panel(screen, "accuracy")
        await until(pilot, lambda: len(acc.shown) == 6, "six runs drawn")
        await pilot.pause()
        legend = " ".join(drawn(acc.query_one(".chart-title")))
        assert all(run in legend for run in runs), legend
