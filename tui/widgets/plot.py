"""What every panel's plot shares (a chart, a distribution, a group's band): a ``PlotWidget`` that draws
what it is given, a band between two lines, and y limits with a margin."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from textual_plot import HiResMode, NumericAxisFormatter, PlotWidget

from tui.format import tick_labels

Y_MARGIN = 0.05
"""Room above and below the y extremes, as a share of their range."""


class Ticks(NumericAxisFormatter):
    """textual-plot's nice tick positions, labelled by the console's one rule (``tui.format.tick_labels``):
    neighbours that differ, SI or scientific notation where shorter."""

    def get_labels_for_ticks(self, ticks: Sequence[float]) -> list[str]:
        return tick_labels(list(ticks))


def panel_plot(**kwargs: Any) -> PlotWidget:  # PlotWidget's own (an id)
    """A plot with no pan or zoom of its own (the screen's keys move it), never focused itself (its panel is),
    with one row under it for the x ticks and 9 columns left of it for the y ticks."""
    plot = PlotWidget(allow_pan_and_zoom=False, **kwargs)
    plot.can_focus = False
    # Set before it is mounted, without its watchers (they lay out children it has only once mounted): its
    # own mounting lays the margins out.
    plot.set_reactive(PlotWidget.margin_top, 0)
    plot.set_reactive(PlotWidget.margin_bottom, 1)
    plot.set_reactive(PlotWidget.margin_left, 9)
    plot.set_x_formatter(Ticks())
    plot.set_y_formatter(Ticks())
    return plot


def draw_band(plot: PlotWidget, x: np.ndarray, lo: np.ndarray, hi: np.ndarray, style: str) -> None:
    """The range ``lo``–``hi`` over ``x``: a vertical stroke at each x, and the two edges as lines between."""
    plot.errorbar(x, (lo + hi) / 2, yerr=(hi - lo) / 2, marker_style=style, hires_mode=HiResMode.HALFBLOCK)
    for edge in (lo, hi):
        plot.plot(x, edge, line_style=style, hires_mode=HiResMode.BRAILLE)


def padded(low: float, high: float) -> tuple[float, float]:
    """Y limits from ``low`` to ``high`` with a margin (one around a single value, where they are equal)."""
    pad = (high - low) * Y_MARGIN or abs(high) * Y_MARGIN or 1.0
    return low - pad, high + pad
