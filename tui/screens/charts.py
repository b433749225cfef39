"""Charts of one run, or of several runs overlaid: history from the series API, live points from the
watch stream through ``leyline.series``, or everything computed here from a local run log."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from leyline import Event, RunFinished, RunStatus
from leyline.charts import DEFAULT_CHARTS, OWN_CHARTS, hidden_charts
from leyline.runs import RunSummary
from leyline.series import X_AXES, kind_of_name, x_of
from tui.chart_data import LocalSeries, SeriesSet
from tui.safe_text import plain
from tui.screens.chart_feed import ChartFeed
from tui.screens.chart_messages import HistoryDue, HistoryLoaded, MarkersLoaded, RunKnown, SeriesEvents
from tui.screens.series_picker import SeriesPicker
from tui.widgets.chart import MARKER_GLYPH, MARKER_STYLE, PALETTE, ChartPanel, ChartSpec, ChartView

if TYPE_CHECKING:
    from textual.widget import Widget

SMOOTHING = (0.0, 0.6, 0.9, 0.97)


class ChartScreen(ChartFeed, Screen[None]):
    """Charts over the whole run; ``+``/``-`` zoom and ←/→ pan every chart's x together, ``0`` shows
    the whole run again (and follows live points), ``s`` smooths, ``b`` draws best-so-far, ``x`` changes
    the x axis, ``l`` picks one label (env) to show, ``a`` adds a chart of any series, ``d`` shows the
    first run's distributions (bands over steps, the histogram at a step)."""

    BINDINGS = [
        Binding("plus,equals_sign", "zoom(0.5)", "zoom in"),
        Binding("minus", "zoom(2)", "zoom out"),
        Binding("left", "pan(-0.25)", "pan", show=False),
        Binding("right", "pan(0.25)", "pan", show=False),
        Binding("0", "whole_run", "whole run"),
        Binding("s", "smoothing", "smooth"),
        Binding("b", "best", "best"),
        Binding("x", "axis", "x axis"),
        Binding("l", "label", "label"),
        Binding("a", "add_chart", "add…"),
        Binding("backspace", "remove_chart", "remove", show=False),
        Binding("down", "app.focus_next", "next chart", show=False),
        Binding("up", "app.focus_previous", "previous chart", show=False),
        Binding("escape", "back", "back"),
        Binding("d", "distributions", "distributions"),
    ]
    DEFAULT_CSS = """
    ChartScreen #chart-head { height: 1; padding: 0 1; background: $boost; }
    ChartScreen #chart-markers { height: 1; padding: 0 1; }
    ChartScreen #chart-note { height: 1; padding: 0 1; color: $text-muted; }
    ChartScreen #charts { layout: grid; grid-size: 1; grid-gutter: 0 1; }
    """

    def __init__(self, run_ids: list[str], local: dict[str, list[Event]] | None = None) -> None:
        super().__init__(name="charts:" + ",".join(run_ids))
        self.run_ids = list(dict.fromkeys(run_ids))
        self.runs: dict[str, RunSummary] = {}
        self.data = SeriesSet()
        self.data.runs_expected = {r for r in self.run_ids if r not in (local or {})}
        self.view = ChartView(by_run=len(self.run_ids) > 1)
        self.local: dict[str, LocalSeries] = {run: LocalSeries(run, events) for run, events in (local or {}).items()}
        self._drawn: tuple[object, ...] | None = None
        self._fetching: set[str] = set()  # runs whose history is being read
        self._asked: set[tuple[str, str]] = set()  # (run, name) read on the current x axis
        self._told: set[str] = set()  # runs whose history could not be read, said once
        self._own: list[ChartPanel] = []  # the charts of a loop's own metrics, first
        self._own_names: set[str] = set()
        self.data.accept = lambda name: any(p.spec.matches(name) for p in self.panels)

    @property
    def panels(self) -> list[ChartPanel]:
        return list(self.query(ChartPanel))

    def compose(self) -> ComposeResult:
        yield Static(id="chart-head")
        yield Static(id="chart-markers")
        yield Static(id="chart-note")
        with VerticalScroll(id="charts"):
            for spec in DEFAULT_CHARTS:
                yield ChartPanel(spec)
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = plain(", ".join(self.run_ids))
        for local in self.local.values():
            self.data.names_seen.update(local.names())
        self._chart_own_metrics()
        self._want_names()
        for run_id in self.run_ids:
            if run_id in self.local:
                self.local[run_id].fill(self.data)
            else:
                self.follow(run_id)
        self.set_interval(self.watch_app.config.refresh_s, self.redraw)
        self.call_after_refresh(self._layout_for_size)
        first = self.panels
        if first:
            first[0].focus()

    def _chart_own_metrics(self) -> None:
        """A loop's own metrics (``run.log``) come first, a chart each (once: a chart removed stays so);
        where the runs have some, Esper's charts that none of them has give way to them."""
        charted = {n for p in self.panels for n in p.names(self.data)} | self._own_names
        own = sorted(n for n in self.data.names_seen if kind_of_name(n) == "metrics")
        new = [n for n in own if n not in charted][:max(OWN_CHARTS - len(self._own_names), 0)]
        for name in new:
            where = {"after": self._own[-1]} if self._own else {"before": 0}
            self._own.append(self._mount_chart(ChartSpec.of_name(name), **where))
            self._own_names.add(name)
        hidden, why = self.ruled_out()
        for panel in self.panels:
            if panel.spec in DEFAULT_CHARTS:
                panel.display = panel.spec.title not in hidden and (
                    (not own and panel.spec.group is None) or bool(panel.names(self.data)))
        note = self.query_one("#chart-note", Static)
        note.update(Text("; ".join(why)))
        if note.display != bool(why):
            note.display = bool(why)
            self.call_after_refresh(self._layout_for_size)
        focused = isinstance(self.focused, ChartPanel) and self.focused.display
        if new:
            self.call_after_refresh(self._after_add, self._own[0], not focused)

    def configs(self) -> list[dict[str, object]] | None:
        """Each run's config, once every run's is known (from the server or its log)."""
        out: list[dict[str, object]] = []
        for run in self.run_ids:
            config = self.local[run].config if run in self.local else (
                self.runs[run].config if run in self.runs else None)
            if config is None:
                return None
            out.append(dict(config))
        return out

    def ruled_out(self) -> tuple[list[str], list[str]]:
        """The default charts none of the runs can have by its config, and why (``leyline.charts``)."""
        configs = self.configs()
        return hidden_charts(configs) if configs else ([], [])

    def _want_names(self) -> None:
        """Every series a chart shows is wanted: its history fetched, its live points kept."""
        for panel in self.panels:
            self.data.wanted.update(panel.names(self.data))

    def _load_wanted(self, run_id: str) -> None:
        """The history of every wanted series the run lacks: from its log, or from the server."""
        if run_id in self.local:
            self.local[run_id].fill(self.data)
        elif run_id in self.runs:
            self.fetch_history(run_id)

    def on_run_known(self, message: RunKnown) -> None:
        run = message.run
        self.runs[run.run_id] = run
        self.data.listed.add(run.run_id)
        self.data.know_world(run.run_id, run.world_size)
        if message.names is None:
            self.local[run.run_id] = LocalSeries(run.run_id, [])
            self.local[run.run_id].config = dict(run.config)
            self.local[run.run_id].fill(self.data)
            self._chart_own_metrics()
        else:
            self.data.names_seen.update(message.names)
            self._chart_own_metrics()
            self._want_names()

    def on_history_due(self, message: HistoryDue) -> None:
        self.fetch_history(message.run_id)

    def on_series_events(self, message: SeriesEvents) -> None:
        local = self.local.get(message.run_id)
        if local is not None:
            local.add(message.events)
        seen = len(self.data.names_seen)
        self.data.add_events(message.run_id, message.events)
        if len(self.data.names_seen) != seen:
            self._chart_own_metrics()
        if self.data.needs_history(message.run_id):  # a chart's series the run just began to produce
            self._load_wanted(message.run_id)
        run = self.runs.get(message.run_id)
        ended = [e.payload.status for e in message.events if isinstance(e.payload, RunFinished)]
        if run is not None and ended:
            run.status = RunStatus.after_finish(ended[-1])

    def on_history_loaded(self, message: HistoryLoaded) -> None:
        if message.axis == self.data.axis:  # not one read before the x axis changed
            self.data.load_history(message.run_id, message.name, message.series)

    def on_markers_loaded(self, message: MarkersLoaded) -> None:
        self.data.load_markers(message.run_id, message.markers)

    # --- drawing ---------------------------------------------------------------------------------

    def on_resize(self) -> None:
        self._layout_for_size()

    def _layout_for_size(self) -> None:
        """Two charts a screen at 100×30; a 2×3 grid at 160×50."""
        width, height = self.size
        cols = 2 if width >= 140 else 1
        rows = 3 if height >= 45 else 2
        grid = self.query_one("#charts")
        grid.styles.grid_size_columns = cols
        lines = 2 + int(self.query_one("#chart-note").display)  # the head and the marks (and a note)
        panel_height = max(10, (height - lines) // rows)
        grid.styles.grid_rows = str(panel_height)
        for panel in self.panels:
            panel.styles.height = panel_height

    def run_names(self) -> dict[str, str]:
        """How the legend names each run: its name, or its id where names are missing or alike."""
        names = {run: (self.runs[run].name if run in self.runs and self.runs[run].name else run)
                 for run in self.run_ids}
        return names if len(set(names.values())) == len(names) else {run: run for run in self.run_ids}

    def origins(self) -> dict[str, float]:
        """Where each run's wall clock starts, so that runs overlay on time since their start."""
        out: dict[str, float] = {}
        for (run, _), track in self.data.tracks.items():
            if track.x:
                out[run] = min(out.get(run, track.x[0]), min(track.x))
        return out

    def redraw(self, force: bool = False) -> None:
        state = (self.data.version, self.view, tuple(self.size), tuple(id(p) for p in self.panels if p.ready))
        if state == self._drawn and not force:
            return
        self._drawn = state
        names, origin = self.run_names(), self.origins()
        for panel in self.panels:
            panel.draw(self.data, self.view, names, origin)
        self._head(names)
        self._marker_detail()

    def on_descendant_focus(self) -> None:
        self._marker_detail()

    def _marker_detail(self) -> None:
        """What the marks under the focused chart are, latest first."""
        panel = self.focused if isinstance(self.focused, ChartPanel) else next(iter(self.panels), None)
        line = Text()
        names = self.run_names() if self.view.by_run else {}
        for marker in reversed(panel.markers_shown if panel else []):
            x = x_of(marker, self.view.axis)
            line.append(MARKER_GLYPH.get(marker.kind, "?"), style=f"bold {MARKER_STYLE.get(marker.kind, 'white')}")
            env = f" env {marker.env}" if marker.env is not None else ""
            run = f" {names.get(self.data.run_of(marker), '')}" if names else ""
            line.append(plain(f" {self.view.axis} {x:.6g}{run} {marker.label}{env}   "))
            if len(line) > self.size.width:
                break
        self.query_one("#chart-markers", Static).update(line or Text("no markers in view", style="dim"))

    def _head(self, names: dict[str, str]) -> None:
        v = self.view
        head = Text()
        for i, run in enumerate(self.run_ids):
            colour = PALETTE[i % len(PALETTE)] if v.by_run else ""
            head.append("━ " if v.by_run else "", style=colour)
            status = self.runs[run].status if run in self.runs else ("log" if run in self.local else "…")
            head.append(plain(f"{names[run]} "), style="bold")
            head.append(plain(f"({status})  "), style="dim")
        zoom = "whole run" if v.x_range is None else f"{v.x_range[0]:.6g}–{v.x_range[1]:.6g}"
        head.append(plain(f"x: {'seconds since start' if v.axis == 'ts' else v.axis} [{zoom}]  "
                          f"smoothing {v.smoothing:g}  {'best-so-far  ' if v.best else ''}"
                          f"{'label ' + v.label if v.label else ''}"), style="dim")
        self.query_one("#chart-head", Static).update(head)

    def _set_view(self, **changes: Any) -> None:  # ChartView's own fields
        self.view = replace(self.view, **changes)
        self.redraw()

    # --- keys ------------------------------------------------------------------------------------

    def _extent(self) -> tuple[float, float] | None:
        """The x range of everything loaded, on the x the charts show."""
        origin, ts = self.origins(), self.view.axis == "ts"
        spans = [(min(t.x) - (origin.get(run, 0.0) if ts else 0.0), max(t.x) - (origin.get(run, 0.0) if ts else 0.0))
                 for (run, _), t in self.data.tracks.items() if t.x]
        return (min(s[0] for s in spans), max(s[1] for s in spans)) if spans else None

    def action_zoom(self, factor: float) -> None:
        extent = self._extent()
        if extent is None:
            return
        lo, hi = self.view.x_range or extent
        centre, half = (lo + hi) / 2, max((hi - lo) * factor / 2, 1e-9)
        if self.view.x_range is None:
            centre = hi - half  # zooming in from the whole run keeps its latest part in view
        new = (max(centre - half, extent[0]), min(centre + half, extent[1]))
        self._set_view(x_range=None if new[0] <= extent[0] and new[1] >= extent[1] else new)

    def action_pan(self, fraction: float) -> None:
        extent = self._extent()
        if extent is None or self.view.x_range is None:
            return
        lo, hi = self.view.x_range
        shift = (hi - lo) * fraction
        shift = min(max(shift, extent[0] - lo), extent[1] - hi)
        self._set_view(x_range=(lo + shift, hi + shift))

    def action_whole_run(self) -> None:
        self._set_view(x_range=None)

    def action_smoothing(self) -> None:
        self._set_view(smoothing=SMOOTHING[(SMOOTHING.index(self.view.smoothing) + 1) % len(SMOOTHING)])

    def action_best(self) -> None:
        self._set_view(best=not self.view.best)

    def action_axis(self) -> None:
        axis = X_AXES[(X_AXES.index(self.view.axis) + 1) % len(X_AXES)]
        self.data.reset(axis)
        self._asked.clear()
        for run_id in self.run_ids:
            self._load_wanted(run_id)
        self._set_view(axis=axis, x_range=None)

    def action_label(self) -> None:
        labels = sorted({t.label_text for t in self.data.tracks.values()
                         if t.labels.keys() - {"rank"} and any(p.spec.matches(t.name) for p in self.panels)})
        options: list[str | None] = [None, *labels]
        current = options.index(self.view.label) if self.view.label in options else 0
        self._set_view(label=options[(current + 1) % len(options)])

    def action_add_chart(self) -> None:
        charted = {n for p in self.panels for n in p.names(self.data)}

        def chosen(name: str | None) -> None:
            if name:
                self.add_chart(ChartSpec.of_name(name))

        self.app.push_screen(SeriesPicker(sorted(self.data.names_seen - charted)), chosen)

    def add_chart(self, spec: ChartSpec) -> ChartPanel:
        panel = self._mount_chart(spec)
        for run_id in self.run_ids:
            self._load_wanted(run_id)
        self.call_after_refresh(self._after_add, panel)
        return panel

    def _mount_chart(self, spec: ChartSpec, **where: int | Widget) -> ChartPanel:
        """A chart of ``spec``, its series wanted (their history is read by the caller's path)."""
        panel = ChartPanel(spec)
        self.query_one("#charts").mount(panel, **where)
        self.data.wanted.update(n for n in self.data.names_seen if spec.matches(n))
        return panel

    def _after_add(self, panel: ChartPanel, focus: bool = True) -> None:
        self._layout_for_size()
        if focus:
            panel.focus()
            panel.scroll_visible()
        self.redraw(force=True)

    def action_remove_chart(self) -> None:
        if isinstance(self.focused, ChartPanel):
            panel = self.focused
            self._own = [p for p in self._own if p is not panel]
            panel.ready = False  # its plot and title go first, while it is still on the screen: not drawn meanwhile
            panel.remove()

    def action_distributions(self) -> None:
        from tui.screens.distributions import DistributionScreen

        run_id = self.run_ids[0]
        if run_id in self.local or self.watch_app.client is None:
            self.app.notify("distributions are read from the server: this run is a local log")
            return
        self.app.push_screen(DistributionScreen(run_id))

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 2:
            self.app.pop_screen()
        else:
            self.watch_app.action_run_picker()
