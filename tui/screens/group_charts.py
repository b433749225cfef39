"""Charts of a group of runs (a sweep, the seeds of one experiment): each metric's mean over the group's
runs as a line, their min–max range as a band under it (``GET /run-groups/series/{name}``); ``e`` opens
the runs themselves, overlaid."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import numpy as np
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Static
from textual_plot import HiResMode, PlotWidget

from leyline.charts import HIDDEN_METRICS
from leyline.groups import Band
from leyline.payloads import Scalar
from tui.client import ApiError
from tui.runs_table import fmt_value
from tui.safe_text import plain, run_text
from tui.screens.base import left
from tui.widgets.chart import PALETTE
from tui.widgets.plot import draw_band, padded, panel_plot

if TYPE_CHECKING:
    from tui.app import EsperWatch

MAX_CHARTS = 8
BAND_POINTS = 300
OVERLAY_RUNS = 16
"""Runs ``e`` overlays at most (the server's overlay limit)."""


class BandPanel(Widget):
    """One series over the group: the mean (a line) and the min–max range (a band of vertical strokes)."""

    DEFAULT_CSS = """
    BandPanel { height: 14; border: round $panel; }
    BandPanel > .band-title { height: 1; }
    BandPanel > PlotWidget { height: 1fr; }
    """

    def __init__(self, name: str) -> None:
        super().__init__()
        self.series_name = name
        self.border_title = run_text(name)  # a series name: the run's text
        self.bands: list[Band] = []

    def compose(self) -> ComposeResult:
        yield Static(Text("loading…", style="dim"), classes="band-title")
        yield panel_plot()

    def show(self, bands: list[Band]) -> None:
        self.bands = [b for b in bands if b.x]
        plot = self.query_one(PlotWidget)
        plot.clear()
        title = Text()
        for i, b in enumerate(self.bands):
            colour = PALETTE[i % len(PALETTE)]
            x, lo, hi = (np.asarray(v, dtype=float) for v in (b.x, b.min, b.max))
            draw_band(plot, x, lo, hi, f"{colour} dim")  # the band, then its mean over it
            plot.plot(x, np.asarray(b.mean, dtype=float), line_style=f"bold {colour}", hires_mode=HiResMode.BRAILLE)
            label = " ".join(f"{k}={v}" for k, v in b.labels.items())  # the rank only where a run has several
            label = f"{label} mean" if label else "mean"
            title.append("━ ", style=colour).append(plain(label) + " ", style="bold")
            title.append(f"{fmt_value(b.mean[-1])} [{fmt_value(b.min[-1])}–{fmt_value(b.max[-1])}] "
                         f"over {b.n[-1]} runs  ")
        self.query_one(".band-title", Static).update(title or Text("no points in these runs", style="dim"))
        if not self.bands:
            return
        low = min(min(b.min) for b in self.bands)
        high = max(max(b.max) for b in self.bands)
        plot.set_ylimits(*padded(low, high))  # the band's extremes, which the plot's own scale leaves out
        plot.set_xlimits(min(b.x[0] for b in self.bands), max(b.x[-1] for b in self.bands))


class GroupChartScreen(Screen[None]):
    """The charts of one group's runs, mean and band; escape goes back to the table."""

    BINDINGS = [Binding("escape,q", "back", "back"), Binding("e", "expand", "its runs")]
    DEFAULT_CSS = """
    GroupChartScreen #group-title { height: 1; padding: 0 1; background: $boost; }
    """

    def __init__(self, by: str, value: Scalar, run_ids: list[str], metrics: list[str] | None = None) -> None:
        super().__init__(name="group-charts")
        self.by, self.value, self.run_ids = by, value, run_ids
        self.metrics = metrics or []
        self.panels: list[BandPanel] = []

    @property
    def watch_app(self) -> EsperWatch:
        return cast("EsperWatch", self.app)

    def compose(self) -> ComposeResult:
        yield Static(Text.assemble(plain(f"{self.by} = "), (plain(fmt_value(self.value, 60)), "bold"),
                                   f": {len(self.run_ids)} runs, each metric's mean (line) and min–max (band)"),
                     id="group-title")
        yield VerticalScroll(id="bands")
        yield Footer()

    def on_mount(self) -> None:
        self.load()

    async def _names(self) -> list[str]:
        """The metric columns of the table, else the series the first runs have (the machine's left out)."""
        if self.metrics:
            return self.metrics[:MAX_CHARTS]
        client = self.watch_app.require_client()
        names: set[str] = set()
        for run_id in self.run_ids[:3]:
            names |= set(await client.series_names(run_id))
        return sorted(n for n in names if not n.startswith(HIDDEN_METRICS))[:MAX_CHARTS]

    @work(exclusive=True)
    async def load(self) -> None:
        client = self.watch_app.require_client()
        box = self.query_one("#bands", VerticalScroll)
        try:
            for name in await self._names():
                if left(self):
                    return
                panel = BandPanel(name)
                await box.mount(panel)
                self.panels.append(panel)
                reply = await client.bands(name, self.run_ids, "step", BAND_POINTS)
                if left(self):
                    return
                panel.show(reply.bands)
        except ApiError as err:
            if left(self):
                return
            self.query_one("#group-title", Static).update(run_text(f"cannot read the group's series: {err}",
                                                                   "bold red"))

    def action_expand(self) -> None:
        from tui.screens.charts import ChartScreen

        self.app.push_screen(ChartScreen(self.run_ids[:OVERLAY_RUNS]))

    def action_back(self) -> None:
        self.app.pop_screen()
