"""Distributions of one run (``run.log`` of ``nissa.Histogram``, ``run.watch(model, histograms=…)``, a debug
window's per-layer ``debug/…`` ones), TensorBoard's way: each name is one panel, its bands over steps between
the 0/7/16/31/50/69/84/93/100th percentiles of each step's histogram (the server's ``quantiles``), the median a
line, and under them the histogram at one step as bars. ←/→ move that step (home/end: the first, the latest),
↑/↓ the panel; the step is marked on the bands."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import numpy as np
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Input, Static
from textual_plot import HiResMode, PlotWidget

from leyline.payloads_histogram import DistributionNames, HistogramAt
from tui.client import ApiError
from tui.runs_table import fmt_value
from tui.safe_text import run_text
from tui.screens.base import left
from tui.widgets.plot import draw_band, padded, panel_plot

if TYPE_CHECKING:
    from tui.app import EsperWatch

MAX_PANELS = 24
"""Distributions a page shows (in the server's order: a loop's own before a debug window's layers)."""
MAX_STEPS = 200
"""Steps read per distribution, spread evenly over the run (the first and the latest kept)."""
BAND = "#4ea8ff"
SHADES = ("#1d3f5e", "#2a5d8a", "#3a7cb8")
"""The outer (0–100%), middle (7–93%) and inner (16–84%, 31–69%) bands, darkest outside."""
STEP_MARK = "#ffd75f"


def at_step(h: HistogramAt) -> Text:
    """The line over a step's bars: where it is, its count and range."""
    line = Text()
    line.append(f"step {h.step}", style=f"bold {STEP_MARK}")
    if h.min is None or h.max is None:
        line.append("  no finite value", style="dim")
    else:
        line.append(f"  {h.count} values in [{fmt_value(h.min)}, {fmt_value(h.max)}]")
    if h.nonfinite:
        line.append(f"  {h.nonfinite} NaN/inf", style="bold red")
    return line


class DistributionPanel(Widget, can_focus=True):
    """One distribution over the run's steps (bands) and at the chosen step (bars)."""

    DEFAULT_CSS = """
    DistributionPanel { height: 24; border: round $panel; }
    DistributionPanel:focus { border: round $accent; }
    DistributionPanel > .dist-head { height: 1; }
    DistributionPanel > #bands { height: 1fr; }
    DistributionPanel > #bars { height: 9; }
    """

    def __init__(self, name: str) -> None:
        super().__init__()
        self.dist_name = name
        self.border_title = run_text(name)  # a name the run wrote: its text
        self.steps: list[HistogramAt] = []
        self.index = -1
        """The step shown as bars (an index into ``steps``); the latest at first."""

    def compose(self) -> ComposeResult:
        yield Static(Text("loading…", style="dim"), classes="dist-head")
        yield panel_plot(id="bands")
        yield panel_plot(id="bars")

    def show(self, steps: list[HistogramAt]) -> None:
        self.steps = [h for h in steps if h.quantiles is not None]
        self.index = len(self.steps) - 1
        self._draw_bands()
        self._draw_step()

    def move(self, by: int | None = None, to: int | None = None) -> None:
        if not self.steps:
            return
        target = to if to is not None else self.index + (by or 0)
        self.index = min(max(target if target >= 0 else len(self.steps) + target, 0), len(self.steps) - 1)
        self._draw_bands()
        self._draw_step()

    def _draw_bands(self) -> None:
        plot = self.query_one("#bands", PlotWidget)
        plot.clear()
        if not self.steps:
            return
        x = np.asarray([h.step for h in self.steps], dtype=float)
        q = np.asarray([h.quantiles for h in self.steps], dtype=float)  # steps × 9 percentiles
        for k, shade in ((0, SHADES[0]), (1, SHADES[1]), (2, SHADES[2]), (3, SHADES[2])):
            draw_band(plot, x, q[:, k], q[:, -1 - k], shade)
        plot.plot(x, q[:, 4], line_style=f"bold {BAND}", hires_mode=HiResMode.BRAILLE)  # the median
        plot.set_ylimits(*padded(float(q[:, 0].min()), float(q[:, -1].max())))
        plot.set_xlimits(x[0], x[-1] if x[-1] > x[0] else x[0] + 1.0)
        plot.add_v_line(float(self.steps[self.index].step), STEP_MARK)

    def _draw_step(self) -> None:
        head = self.query_one(".dist-head", Static)
        plot = self.query_one("#bars", PlotWidget)
        plot.clear()
        if not self.steps:
            head.update(Text("no finite values yet", style="dim"))
            return
        h = self.steps[self.index]
        head.update(at_step(h).append(f"  ({self.index + 1}/{len(self.steps)}, ←/→)", style="dim"))
        if h.min is None or h.max is None:
            return
        width = (h.max - h.min) / len(h.bins) or 1.0
        centres = h.min + width * (np.arange(len(h.bins)) + 0.5)
        plot.bar(centres, np.asarray(h.bins, dtype=float), width=width, bar_style=BAND,
                 hires_mode=HiResMode.HALFBLOCK)
        plot.set_xlimits(h.min, h.max if h.max > h.min else h.min + 1.0)
        plot.set_ylimits(0, max(max(h.bins), 1) * 1.05)


class DistributionScreen(Screen[None]):
    """Every distribution of one run, a page at a time in the server's order (a loop's own before a debug
    window's); ``/`` filters them by name, ``]``/``[`` turn the page; escape goes back to its charts."""

    BINDINGS = [
        Binding("left", "move(-1)", "earlier step"),
        Binding("right", "move(1)", "later step"),
        Binding("home", "first", "first", show=False, priority=True),
        Binding("end", "latest", "latest", priority=True),
        Binding("down", "app.focus_next", "next", show=False),
        Binding("up", "app.focus_previous", "previous", show=False),
        Binding("slash", "filter", "filter"),
        Binding("right_square_bracket", "page(1)", "next page"),
        Binding("left_square_bracket", "page(-1)", "previous page"),
        Binding("r", "reload", "reload"),
        Binding("escape,q", "back", "back"),
    ]
    AUTO_FOCUS = ""  # the first panel takes it once shown, not the hidden filter
    DEFAULT_CSS = """
    DistributionScreen #dist-title { height: 1; padding: 0 1; background: $boost; }
    DistributionScreen #dist-filter { display: none; }
    DistributionScreen #dist-filter.shown { display: block; }
    """

    def __init__(self, run_id: str) -> None:
        super().__init__(name=f"distributions:{run_id}")
        self.run_id = run_id
        self.panels: dict[str, DistributionPanel] = {}
        self.filter_text = ""
        self.first = 0
        self.total = 0
        """Names that match the filter, in all (the server's count)."""

    @property
    def watch_app(self) -> EsperWatch:
        return cast("EsperWatch", self.app)

    def compose(self) -> ComposeResult:
        yield Static(run_text(f"distributions of {self.run_id}"), id="dist-title")
        yield Input(placeholder="only the distributions whose name holds…", id="dist-filter")
        yield VerticalScroll(id="distributions")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = run_text(self.run_id).plain
        self.load()

    def _title(self, page: DistributionNames) -> Text:
        if not page.total:
            return Text.assemble(run_text(self.run_id, "bold"), ": no distributions" +
                                 (" match the filter" if self.filter_text else " in this run"))
        span = f"{self.first + 1}–{self.first + len(page.names)} of " if page.total > len(page.names) else ""
        return Text.assemble(run_text(self.run_id, "bold"), f": {span}{page.total} distributions",
                             *((" holding ", run_text(self.filter_text, "bold")) if self.filter_text else ()),
                             ("  ([/]: page, /: filter)" if page.total > MAX_PANELS else "", "dim"),
                             ("  bands: 0–100, 7–93, 16–84, 31–69th percentiles; line: median", "dim"))

    @work(exclusive=True)
    async def load(self) -> None:
        client = self.watch_app.require_client()
        title = self.query_one("#dist-title", Static)
        box = self.query_one("#distributions", VerticalScroll)
        try:
            page = await client.distribution_names(self.run_id, self.filter_text, self.first, MAX_PANELS)
            if left(self):
                return
            self.total = page.total
            title.update(self._title(page))
            if list(self.panels) != page.names:  # another page or filter: its panels, in its order
                await box.remove_children()
                self.panels.clear()
            for name in page.names:
                panel = self.panels.get(name)
                if panel is None:
                    panel = self.panels[name] = DistributionPanel(name)
                    await box.mount(panel)
                    if len(self.panels) == 1 and not isinstance(self.focused, Input):
                        panel.focus()
                reply = await client.histograms(self.run_id, name, MAX_STEPS)
                if left(self):
                    return
                panel.show(reply.histograms)
        except ApiError as err:
            if not left(self):
                title.update(run_text(f"cannot read the run's distributions: {err}", "bold red"))

    def action_filter(self) -> None:
        box = self.query_one("#dist-filter", Input)
        box.add_class("shown")
        box.focus()

    @on(Input.Submitted, "#dist-filter")
    def filter_done(self, event: Input.Submitted) -> None:
        self.filter_text, self.first = event.value.strip(), 0
        if not self.filter_text:
            event.input.remove_class("shown")
        self.set_focus(None)
        self.load()

    def action_page(self, by: int) -> None:
        offset = self.first + by * MAX_PANELS
        if 0 <= offset < self.total:
            self.first = offset
            self.load()

    def _focused(self) -> DistributionPanel | None:
        return self.focused if isinstance(self.focused, DistributionPanel) else None

    def action_move(self, by: int) -> None:
        if (panel := self._focused()) is not None:
            panel.move(by=by)

    def action_first(self) -> None:
        if (panel := self._focused()) is not None:
            panel.move(to=0)

    def action_latest(self) -> None:
        if (panel := self._focused()) is not None:
            panel.move(to=-1)

    def action_reload(self) -> None:
        self.load()

    def action_back(self) -> None:
        box = self.query_one("#dist-filter", Input)
        if box.has_focus:  # escape leaves the filter first
            if not self.filter_text:
                box.remove_class("shown")
            self.set_focus(None)
            return
        self.app.pop_screen()
