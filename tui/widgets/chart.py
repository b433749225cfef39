"""One chart: a title with each line's current and best value, the plot, and what happened in view.

The plot is textual-plot's ``PlotWidget``, chosen over textual-plotext after trying both: it is a
native Textual widget (canvas, theme colours, braille lines) that takes numpy arrays and keeps its
own axes, ticks and vertical lines, where textual-plotext wraps plotext's global figure, re-plots
from Python lists each frame, has no vertical-line legend and no zoom or pan of its own. Zoom and pan
are the chart screen's (one x range for every chart, so that charts stay aligned); this widget
draws what it is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from rich.color import Color, ColorTriplet, blend_rgb
from rich.text import Text
from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import Static
from textual_plot import HiResMode, PlotWidget

from leyline.charts import ChartDef
from leyline.series import Marker, x_of
from tui.chart_data import SeriesSet, Track, best_point, running_best, smooth, window
from tui.safe_text import plain, run_text
from tui.widgets.plot import padded, panel_plot

ChartSpec = ChartDef
"""A chart: leyline's definition (``leyline.charts``), the one the web page is served."""

PALETTE = ("#4ea8ff", "#ff9f1c", "#5fd75f", "#e05fe0", "#ffd75f", "#ff5f5f", "#2ed3d3", "#b0b0b0")
MARKER_STYLE = {"command": "#d7af00", "anomaly": "#ff3030", "fossilized": "#00c000", "pruned": "#c000c0",
                "resumed": "#00afff", "end": "#808080"}
MARKER_GLYPH = {"command": "C", "anomaly": "!", "fossilized": "F", "pruned": "P", "resumed": "R", "end": "E"}
MAX_MARKERS = 48  # vertical lines drawn at most per chart: the latest ones
LINE_KINDS = frozenset({"command", "anomaly", "resumed"})
"""Markers drawn across the chart; seeds fossilized and pruned (many) only as glyphs under it."""
GLYPH_PRIORITY = ("pruned", "fossilized", "command", "resumed", "anomaly", "end")
"""Where glyphs share a column, the later kind here wins (the end, one a run, over its last seeds' marks)."""


@dataclass(frozen=True)
class ChartView:
    """How every chart of a screen is drawn at the moment."""

    axis: str = "step"
    x_range: tuple[float, float] | None = None
    """The x window shown; None: the whole run, following live points."""
    smoothing: float = 0.0
    best: bool = False
    """Draw each line's best-so-far as well."""
    label: str | None = None
    """Show only the tracks with this label text (``env=2``); None: all."""
    by_run: bool = False
    """One colour per run (an overlay of runs) rather than one per line."""


def shade(colour: str, k: int, n: int) -> str:
    """The ``k``-th of ``n`` shades of ``colour``: from darker through the colour itself to lighter."""
    if n <= 1:
        return colour
    fade = (k / (n - 1) - 0.5) * 0.9
    towards = ColorTriplet(255, 255, 255) if fade > 0 else ColorTriplet(0, 0, 0)
    return blend_rgb(Color.parse(colour).get_truecolor(), towards, abs(fade)).hex


def track_colours(tracks: list[Track], runs: list[str], by_run: bool) -> list[str]:
    """A colour per track: one per line; in an overlay of runs one per run (its order in ``runs``), the tracks
    of a run (its envs, its labels) in shades of it, so that a run reads as one family of lines."""
    if not by_run:
        return [PALETTE[i % len(PALETTE)] for i in range(len(tracks))]
    out = []
    for track in tracks:
        own = [t for t in tracks if t.run_id == track.run_id]
        base = PALETTE[(runs.index(track.run_id) if track.run_id in runs else 0) % len(PALETTE)]
        out.append(shade(base, next(i for i, t in enumerate(own) if t is track), len(own)))
    return out


def _fmt(value: float | None) -> str:
    if value is None or not np.isfinite(value):
        return "—"
    magnitude = abs(value)
    if magnitude and (magnitude >= 1e5 or magnitude < 1e-3):
        return f"{value:.2e}"
    return f"{value:.4g}"


class MarkerStrip(Static):
    """A glyph under each marker's x, placed at the width the strip has when it is drawn (the plot's own width:
    placed at the first draw, before the layout gave the chart its size, every glyph would sit at the left)."""

    def __init__(self, **kwargs: Any) -> None:  # Static's own
        super().__init__(**kwargs)
        self._marks: list[tuple[float, Marker]] = []
        self._span = (0.0, 1.0)
        self._margin = 0

    def show(self, marks: list[tuple[float, Marker]], lo: float, hi: float, margin: int) -> None:
        self._marks, self._span, self._margin = list(marks), (lo, hi), margin
        self.refresh()

    def column(self, x: float) -> int:
        """The column of ``x`` in this strip, as the plot places it inside its axis box."""
        lo, hi = self._span
        inner = max(self.size.width - self._margin - 2, 1)
        return self._margin + 1 + min(max(int((x - lo) / (hi - lo) * inner) if hi > lo else 0, 0), inner - 1)

    def render(self) -> Text:
        if not self._marks:
            return Text("")
        strip = [" "] * max(self.size.width, 1)
        styles: dict[int, str] = {}
        for x, marker in sorted(self._marks, key=lambda m: GLYPH_PRIORITY.index(m[1].kind)
                                if m[1].kind in GLYPH_PRIORITY else 0):
            col = min(self.column(x), len(strip) - 1)
            strip[col] = MARKER_GLYPH.get(marker.kind, "?")
            styles[col] = f"bold {MARKER_STYLE.get(marker.kind, 'white')}"
        line = Text("".join(strip))
        for col, style in styles.items():
            line.stylize(style, col, col + 1)
        return line


class ChartPanel(Widget, can_focus=True):
    """A chart of one ``ChartSpec`` over a ``SeriesSet``; focus it to add, cycle labels or remove it."""

    DEFAULT_CSS = """
    ChartPanel { height: 14; border: round $panel; padding: 0; }
    ChartPanel:focus { border: round $accent; }
    ChartPanel > .chart-title { height: auto; max-height: 4; }
    ChartPanel > .chart-markers { height: 1; color: $text-muted; }
    ChartPanel > PlotWidget { height: 1fr; }
    """

    def __init__(self, spec: ChartSpec, **kwargs: Any) -> None:  # Widget's own
        super().__init__(**kwargs)
        self.spec = spec
        self.border_title = run_text(spec.title)  # a series name: the run's text
        self.shown: list[Track] = []  # what the last draw plotted, for tests and the title
        self.colours: list[str] = []  # the colour of each line shown
        self.markers_shown: list[Marker] = []
        self.ready = False  # the plot's own children exist only once this panel is mounted

    def compose(self) -> ComposeResult:
        yield Static(classes="chart-title")
        yield panel_plot()
        yield MarkerStrip(classes="chart-markers")

    def on_mount(self) -> None:
        self.ready = True

    def names(self, data: SeriesSet) -> list[str]:
        return sorted(n for n in data.names_seen | data.wanted if self.spec.matches(n))

    def draw(self, data: SeriesSet, view: ChartView, run_names: dict[str, str],
             origin: dict[str, float]) -> None:
        if not self.ready:
            return
        plot = self.query_one(PlotWidget)
        tracks = [t for name in self.names(data) for t in data.tracks_of(name) if t.x]
        if view.label is not None:
            tracks = [t for t in tracks if t.label_text == view.label] or tracks
        arrays = [(np.asarray(t.x, dtype=float) - (origin.get(t.run_id, 0.0) if view.axis == "ts" else 0.0),
                   np.asarray(t.y, dtype=float)) for t in tracks]
        self.shown = tracks
        title = Text()
        ticks = None if tracks else ()  # no ticks without points: those of another x axis would stay
        plot.set_xticks(ticks)
        plot.set_yticks(ticks)
        plot.clear()
        if not tracks:
            title.append(self._empty_reason(data, view), style="dim")
            self.query_one(".chart-title", Static).update(title)
            self.markers_shown = []
            self.query_one(MarkerStrip).show([], 0.0, 1.0, plot.margin_left)
            return
        lo, hi = view.x_range or (min(float(x.min()) for x, _ in arrays), max(float(x.max()) for x, _ in arrays))
        points = max(2 * self.size.width, 64)
        colours = self.colours = track_colours(tracks, list(run_names), view.by_run)
        ys_in_view = []
        for track, colour, (x, y) in zip(tracks, colours, arrays, strict=True):
            if view.smoothing > 0:
                plot.plot(*window(x, y, lo, hi, points), line_style=f"{colour} dim", hires_mode=HiResMode.BRAILLE)
            wx, wy = window(x, smooth(y, view.smoothing), lo, hi, points)
            plot.plot(wx, wy, line_style=colour, hires_mode=HiResMode.BRAILLE)
            ys_in_view.append(wy)
            if view.best:
                bx, by = window(x, running_best(y, self.spec.higher_is_better), lo, hi, points)
                plot.plot(bx, by, line_style=f"{colour} italic", hires_mode=HiResMode.HALFBLOCK)
            alone = sum(t.run_id == track.run_id for t in tracks) == 1  # else its labels tell its tracks apart
            self._title_entry(title, track, colour, x, y, view, run_names, len(tracks), alone)
        missing = [name for run, name in run_names.items() if view.by_run and all(t.run_id != run for t in tracks)
                   and all(data.has_history(run, n) for n in self.names(data))]
        if missing:
            title.append(plain(f"  not in {', '.join(missing)}"), style="dim")
        self.query_one(".chart-title", Static).update(title)
        self._draw_markers(plot, data, view, origin, lo, hi, {t.run_id for t in tracks})
        plot.set_xlimits(lo, hi if hi > lo else lo + 1.0)
        self._set_ylimits(plot, ys_in_view)

    def _empty_reason(self, data: SeriesSet, view: ChartView) -> str:
        names = self.names(data)
        if any(data.tracks_of(name) for name in names):  # read, but none of its points has this x
            return f"no point of this series has a {view.axis} (x: another x axis)"
        if not data.runs_expected <= data.listed:  # a run's series not known yet: not "no such series"
            return "loading…"
        return "no points yet" if data.wanted & set(names) else "no such series in this run"

    def _short(self, track: Track) -> str:
        """A track's legend: its labels, else its series as the chart names it: a chart of one series by
        its title (``val.loss`` whole, never ``loss``; ``policy loss``), a pattern chart by what its pattern
        leaves (``op`` in the entropy chart of ``ppo_update.entropy.*``), a chart of several series by the
        series' full name (the web page's legend names lines by the same rule)."""
        text = track.label_text
        if text == track.name and self.spec.names == (track.name,):
            return self.spec.title
        for pattern in self.spec.names:
            head = pattern.partition("*")[0]
            if "*" in pattern and text.startswith(head) and len(text) > len(head):
                return text[len(head):]
        return text

    def _title_entry(self, title: Text, track: Track, colour: str, x: np.ndarray, y: np.ndarray,
                     view: ChartView, run_names: dict[str, str], count: int, alone: bool) -> None:
        name = self._short(track)
        if view.by_run:
            run = run_names.get(track.run_id, track.run_id)
            name = run if alone else f"{run} {name}"
        if title:
            title.append("  ")
        title.append("━ ", style=colour)
        title.append(plain(f"{name} "), style="bold")
        title.append(_fmt(track.last()))
        best = best_point(x, y, self.spec.higher_is_better)
        if best is not None:
            arrow = "↑" if self.spec.higher_is_better else "↓"
            where = f"@{_fmt(best[0])}" if count <= 2 else ""
            title.append(f" {arrow}{_fmt(best[1])}{where}", style="dim")
        non_finite = int(np.count_nonzero(~np.isfinite(y)))
        if non_finite:  # not drawn (a line cannot), but never hidden
            title.append(f" {non_finite} NaN/inf", style="bold red")

    def _draw_markers(self, plot: PlotWidget, data: SeriesSet, view: ChartView, origin: dict[str, float],
                      lo: float, hi: float, runs: set[str]) -> None:
        """Commands, anomalies and resumes as vertical lines; every marker as a glyph under its x (of the
        runs this chart draws: in an overlay, what one run did is not marked on a series it lacks)."""
        env = view.label[4:] if view.label and view.label.startswith("env=") and "," not in view.label else None
        marks: list[tuple[float, Marker]] = []
        for run_id, markers in data.markers.items():
            if run_id not in runs:
                continue
            shift = origin.get(run_id, 0.0) if view.axis == "ts" else 0.0
            for marker in markers:
                x = x_of(marker, view.axis)
                if x is None or (env is not None and marker.env is not None and str(marker.env) != env):
                    continue
                if lo <= x - shift <= hi:
                    marks.append((x - shift, marker))
        marks.sort(key=lambda m: m[0])
        self.markers_shown = [m for _, m in marks]
        for x, marker in marks[-MAX_MARKERS:]:
            if marker.kind in LINE_KINDS:
                plot.add_v_line(x, f"{MARKER_STYLE[marker.kind]} dim")
        self.query_one(MarkerStrip).show(marks, lo, hi, plot.margin_left)

    def _set_ylimits(self, plot: PlotWidget, ys: list[np.ndarray]) -> None:
        finite = [y[np.isfinite(y)] for y in ys]
        finite = [y for y in finite if len(y)]
        if not finite:
            plot.set_ylimits(None, None)
            return
        lo, hi = float(min(y.min() for y in finite)), float(max(y.max() for y in finite))
        plot.set_ylimits(*padded(lo, hi))
