"""Sweeps in the console: the list (``S`` from the runs table) and a sweep's view, the web page's one definition
(``GET /sweeps/{id}/view``, ``leyline.sweep_view``): its trials (status, values, metric, best), its lineage (which
trial copied which, at which step, with what values); ``g`` charts the population's curves (a colour per trial,
each exploit a mark on its run), ``p`` draws its parallel coordinates (values → metric), ``x`` stops the trial
under the cursor, ``X`` the whole sweep, each after a confirmation. Everything a run or a spec wrote is drawn as
text."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from leyline import StopRequest
from leyline.sweep_view import SweepView, TrialRow, value_text
from leyline.sweeps import SweepInfo
from tui.client import ApiError
from tui.safe_text import run_text
from tui.screens.base import left
from tui.screens.forms import ConfirmStop

if TYPE_CHECKING:
    from tui.app import EsperWatch

STOP_SWEEP = "Queued trials are dropped and every running trial's run is asked to stop; no trial starts after."
STOP_TRIAL = "Its run is asked to stop at its next step boundary; the sweep goes on without it."
REFRESH_S = 2.0


class SweepsScreen(Screen[None]):
    """Every sweep, newest first; enter opens one."""

    BINDINGS = [Binding("escape,q", "app.pop_screen", "back"), Binding("enter", "open", "open")]

    def __init__(self) -> None:
        super().__init__(name="sweeps")
        self.sweeps: list[SweepInfo] | None = None

    def compose(self) -> ComposeResult:
        yield Static(run_text("sweeps: loading…"), id="sweeps-title")
        yield DataTable(cursor_type="row", zebra_stripes=True, id="sweeps")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for title in ("sweep", "id", "status", "method", "metric", "trials", "best"):
            table.add_column(title, key=title)
        self.load()

    @work(exclusive=True)
    async def load(self) -> None:
        try:
            sweeps = await cast("EsperWatch", self.app).require_client().sweeps()
        except ApiError as err:
            if not left(self):
                self.query_one("#sweeps-title", Static).update(run_text(f"cannot list the sweeps: {err}"))
            return
        if left(self):
            return
        self.sweeps = sweeps
        table = self.query_one(DataTable)
        table.clear()
        for s in sweeps:
            running = sum(t.status == "running" for t in s.trials)
            table.add_row(run_text(s.name, style="bold"), run_text(s.sweep_id), run_text(s.status), run_text(s.method),
                          run_text(f"{s.metric.goal} {s.metric.name}"), f"{len(s.trials)} ({running} running)",
                          "—" if s.best_trial is None else f"t{s.best_trial}", key=s.sweep_id)
        self.query_one("#sweeps-title", Static).update(run_text(
            f"{len(sweeps)} sweeps (enter opens one)" if sweeps else "no sweep yet: nissa sweep create SPEC.toml"))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.app.push_screen(SweepScreen(event.row_key.value))

    def action_open(self) -> None:
        table = self.query_one(DataTable)
        if self.sweeps and table.row_count:
            self.app.push_screen(SweepScreen(self.sweeps[table.cursor_row].sweep_id))


class SweepScreen(Screen[None]):
    """One sweep: its trials, then its lineage; asked again every two seconds while it runs."""

    BINDINGS = [
        Binding("escape,q", "app.pop_screen", "back"),
        Binding("g", "curves", "curves"),
        Binding("p", "parallel", "parallel coordinates"),
        Binding("x", "stop_trial", "stop trial"),
        Binding("X", "stop_sweep", "stop sweep"),
    ]
    DEFAULT_CSS = """
    SweepScreen #sweep-trials { height: auto; max-height: 50%; }
    SweepScreen #sweep-lineage { height: 1fr; }
    SweepScreen Static { height: auto; padding: 0 1; }
    """

    def __init__(self, sweep_id: str) -> None:
        super().__init__(name="sweep:" + sweep_id)
        self.sweep_id = sweep_id
        self.view: SweepView | None = None

    def compose(self) -> ComposeResult:
        yield Static(run_text(f"sweep {self.sweep_id}: loading…"), id="sweep-title")
        yield DataTable(cursor_type="row", zebra_stripes=True, id="sweep-trials")
        yield Static(run_text("lineage", style="bold"), id="lineage-title")
        yield DataTable(cursor_type="row", zebra_stripes=True, id="sweep-lineage")
        yield Footer()

    def on_mount(self) -> None:
        self.load()
        self.set_interval(REFRESH_S, self._again)

    def _again(self) -> None:
        if self.view is None or self.view.live:
            self.load()

    @work(exclusive=True)
    async def load(self) -> None:
        try:
            view = await cast("EsperWatch", self.app).require_client().sweep_view(self.sweep_id)
        except ApiError as err:
            if not left(self):
                self.query_one("#sweep-title", Static).update(run_text(f"cannot read sweep {self.sweep_id}: {err}"))
            return
        if left(self):
            return
        self.view = view
        self._show(view)

    def _show(self, v: SweepView) -> None:
        best = "" if v.best_trial is None else f"; best: t{v.best_trial}"
        self.query_one("#sweep-title", Static).update(run_text(
            f"{v.name} · {v.sweep_id} · {v.method}, {v.metric.goal} {v.metric.name} · {v.status}{best}"
            + (f" · {v.message}" if v.message else "")
            + "   (g curves, p parallel coordinates, x stop trial, X stop sweep)"))
        trials = self.query_one("#sweep-trials", DataTable)
        cursor = trials.cursor_row
        trials.clear(columns=True)
        for title in ("trial", "status", *v.columns, v.metric.name, "best", "step", "exploits", "run"):
            trials.add_column(run_text(title))
        for t in v.trials:
            status = t.status + (" ★" if t.is_best else "")
            trials.add_row(f"t{t.trial_id}", run_text(status, style="bold green" if t.is_best else ""),
                           *(run_text(x) for x in t.values), run_text(t.metric), run_text(t.best), run_text(t.step),
                           str(t.exploits), run_text(t.run_id or "—"), key=str(t.trial_id))
        if trials.row_count:
            trials.move_cursor(row=min(cursor, trials.row_count - 1))
        lineage = self.query_one("#sweep-lineage", DataTable)
        lineage.clear(columns=True)
        for title in ("step", "trial", "copied", "values", "status", "exploit"):
            lineage.add_column(title)
        for e in v.lineage:
            lineage.add_row(value_text(e.step), f"t{e.trial_id}", f"t{e.source_trial}", run_text(e.change),
                            run_text(e.status + (f": {e.message}" if e.message else "")), run_text(e.exploit_ms))
        note = "" if v.lineage else " (no exploit yet)" if v.method == "pbt" else " (only pbt copies trials)"
        self.query_one("#lineage-title", Static).update(run_text("lineage" + note, style="bold"))

    def current_trial(self) -> TrialRow | None:
        if self.view is None or not self.view.trials:
            return None
        row = self.query_one("#sweep-trials", DataTable).cursor_row
        return self.view.trials[row] if 0 <= row < len(self.view.trials) else None

    def action_curves(self) -> None:
        from tui.screens.charts import ChartScreen

        if self.view is not None and self.view.runs:
            self.app.push_screen(ChartScreen(self.view.runs))

    def action_parallel(self) -> None:
        from tui.screens.sweep_parallel import SweepParallelScreen

        if self.view is not None and self.view.lines:
            self.app.push_screen(SweepParallelScreen(self.view))

    def action_stop_trial(self) -> None:
        trial = self.current_trial()
        if trial is None or trial.run_id is None or not trial.stoppable:
            self.app.notify("no running trial under the cursor", severity="warning")
            return
        run_id = trial.run_id

        def answered(yes: bool | None) -> None:
            if yes:
                self.stop(run_id)

        self.app.push_screen(ConfirmStop(run_id, what=f"trial t{trial.trial_id} (run {run_id})", effect=STOP_TRIAL),
                             answered)

    def action_stop_sweep(self) -> None:
        if self.view is None or not self.view.live:
            self.app.notify("this sweep is not running", severity="warning")
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.stop(None)

        self.app.push_screen(ConfirmStop(self.sweep_id, what=f"sweep {self.view.name}", effect=STOP_SWEEP), answered)

    @work(group="stop")
    async def stop(self, run_id: str | None) -> None:
        client = cast("EsperWatch", self.app).require_client()
        try:
            if run_id is None:
                await client.stop_sweep(self.sweep_id)
            else:
                await client.escalate(StopRequest(run_id=run_id, reason="stopped from the console's sweep view"))
        except ApiError as err:
            self.app.notify(f"not stopped: {err}", severity="error")
            return
        self.app.notify("sweep stopped" if run_id is None else f"stop sent to {run_id}")
        self.load()
