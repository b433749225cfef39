"""The plot every panel draws in (a chart, a distribution, a group's band): its margins once mounted, and y
limits with room around the values."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual_plot import PlotWidget

from leyline.charts import DEFAULT_CHARTS
from tui.screens.distributions import DistributionPanel
from tui.screens.group_charts import BandPanel
from tui.widgets.chart import ChartPanel
from tui.widgets.plot import padded, panel_plot


class Panels(App[None]):
    def compose(self) -> ComposeResult:
        yield ChartPanel(DEFAULT_CHARTS[0])
        yield DistributionPanel("acts")
        yield BandPanel("loss")


async def test_every_panel_plot_has_the_tick_margins_and_takes_no_focus():
    app = Panels()
    async with app.run_test(size=(100, 80)) as pilot:
        await pilot.pause()
        plots = list(app.query(PlotWidget))
        assert len(plots) == 4  # a chart's, a distribution's two (bands, bars), a group band's
        for plot in plots:
            assert (plot.margin_top, plot.margin_bottom, plot.margin_left) == (0, 1, 9)
            assert not plot.can_focus
            assert str(plot.query_one("Grid").styles.grid_columns[0]) == "9"  # laid out, not only set


def test_y_limits_leave_room_and_a_single_value_gets_some():
    assert padded(0.0, 10.0) == (-0.5, 10.5)
    assert padded(4.0, 4.0) == (3.8, 4.2)
    assert padded(0.0, 0.0) == (-1.0, 1.0)


class Ticks(App[None]):
    def compose(self) -> ComposeResult:
        yield panel_plot(id="p")


async def test_tick_labels_tell_neighbours_apart_on_screen():
    """A loss that moves in the fourth decimal and a learning rate's x axis read as numbers, not ``4.037
    4.037 4.036`` and ``0.001 0.001 0 0``."""
    app = Ticks()
    async with app.run_test(size=(100, 30)) as pilot:
        plot = app.query_one(PlotWidget)
        plot.set_ylimits(4.0362, 4.0384)
        plot.set_xlimits(0.0, 0.001)
        await pilot.pause()
        text = app.export_screenshot().replace("&#160;", " ")
        assert "4.0365" in text and "4.0370" in text and "4.0380" in text
        assert "1e-3" in text and "4e-4" in text
