"""A sweep's parallel coordinates in the console (``p`` on a sweep's view): an axis per parameter and one for the
metric, a line per trial in its curve's colour, from the served view's one definition (``leyline.sweep_view``)."""

from __future__ import annotations

import numpy as np
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Static
from textual_plot import HiResMode, PlotWidget

from leyline.sweep_view import SweepView
from tui.safe_text import run_text
from tui.widgets.chart import PALETTE
from tui.widgets.plot import panel_plot


class SweepParallelScreen(Screen[None]):
    """Values → metric: where each trial sits on every axis (0 its low end, 1 its high end)."""

    BINDINGS = [Binding("escape,q", "app.pop_screen", "back")]
    DEFAULT_CSS = """
    SweepParallelScreen #parallel-plot { height: 1fr; }
    SweepParallelScreen Static { height: auto; padding: 0 1; }
    """

    def __init__(self, view: SweepView) -> None:
        super().__init__(name="sweep-parallel:" + view.sweep_id)
        self.view = view

    def compose(self) -> ComposeResult:
        v = self.view
        yield Static(run_text(f"{v.name} · parallel coordinates: values → {v.metric.name} ({v.metric.goal})"))
        yield panel_plot(id="parallel-plot")
        yield Static(self.axes_text(), id="parallel-axes")
        yield Static(self.legend(), id="parallel-legend")
        yield Footer()

    def on_mount(self) -> None:
        plot = self.query_one("#parallel-plot", PlotWidget)
        runs = {t.trial_id: i for i, t in enumerate(self.view.trials)}
        for line in self.view.lines:
            x = [i for i, p in enumerate(line.points) if p is not None]
            y = [p for p in line.points if p is not None]
            if x:
                colour = PALETTE[runs.get(line.trial_id, 0) % len(PALETTE)]
                plot.plot(np.array(x, dtype=float), np.array(y, dtype=float), line_style=colour,
                          hires_mode=HiResMode.BRAILLE)
        plot.set_xlimits(-0.2, max(len(self.view.axes) - 1, 1) + 0.2)
        plot.set_ylimits(-0.05, 1.05)

    def axes_text(self) -> Text:
        """Each axis by its place on the x axis, with what its ends stand for."""
        out = Text()
        for i, axis in enumerate(self.view.axes):
            out.append(f"{i}: ", style="bold")
            out.append_text(run_text(f"{axis.name} [{axis.low} … {axis.high}]"))
            out.append("   ")
        return out

    def legend(self) -> Text:
        out = Text()
        for i, t in enumerate(self.view.trials):
            out.append("━ ", style=PALETTE[i % len(PALETTE)])
            out.append_text(run_text(f"t{t.trial_id} {t.best}  "))
        return out
