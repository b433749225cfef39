"""The runs table: every run the server knows, with the config values that tell them apart and what
each achieved; sort, filter, select several to overlay their charts or diff two configs."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from tui.client import ApiError, RunSummary
from tui.messages import ApiFailed, RunsLoaded
from tui.runs_table import RUNNING, STATUS_STYLE, Column, columns, differing_params, matches, sort_runs
from tui.safe_text import run_text

if TYPE_CHECKING:
    from tui.app import EsperWatch

LIST_LIMIT = 200


class RunsTable(DataTable):
    """A row table where home and end go to the first and last run (a plain table scrolls sideways)."""

    BINDINGS = [
        Binding("home", "scroll_top", "first", show=False),
        Binding("end", "scroll_bottom", "last", show=False),
    ]


class RunPickerScreen(Screen[None]):
    """Choose runs: enter opens one (a live one live, a finished one as a replay), space selects several."""

    BINDINGS = [
        Binding("enter", "open", "open"),
        Binding("w", "watch", "watch live"),
        Binding("v", "replay", "replay"),
        Binding("g", "charts", "charts"),
        Binding("space", "toggle_select", "select"),
        Binding("c", "compare", "compare"),
        Binding("equals_sign", "diff", "diff configs"),
        Binding("s", "cycle_sort", "sort"),
        Binding("slash", "filter", "filter"),
        Binding("escape", "clear_filter", "clear filter", show=False),
        Binding("d", "escalate('debug')", "debug window", show=False),
        Binding("p", "escalate('profile')", "profile…", show=False),
    ]
    DEFAULT_CSS = """
    RunPickerScreen #title { height: 1; padding: 0 1; background: $boost; }
    RunPickerScreen #runs-filter { display: none; height: 3; }
    RunPickerScreen #runs-filter.shown { display: block; }
    RunPickerScreen DataTable { height: 1fr; }
    """

    def __init__(self) -> None:
        super().__init__(name="runs")
        self.runs: dict[str, RunSummary] = {}
        self.order: list[str] = []  # run ids as the table shows them
        self.selected: set[str] = set()
        self.sort_key = "status"
        self.sort_reverse = False
        self.filter_text = ""
        self._columns: list[Column] = columns([])
        self.total: int | None = None

    @property
    def watch_app(self) -> EsperWatch:
        return self.app  # type: ignore[return-value]

    @property
    def table(self) -> DataTable:
        return self.query_one("#runs", DataTable)

    def compose(self) -> ComposeResult:
        yield Static("runs: loading…", id="title")
        yield Input(placeholder="filter: words of the name or status, or key=value of the config", id="runs-filter")
        yield RunsTable(cursor_type="row", zebra_stripes=True, id="runs")
        yield Footer()

    def on_mount(self) -> None:
        self.table.focus()
        self.poll_runs()

    @work(exclusive=True, group="runs")
    async def poll_runs(self) -> None:
        client = self.watch_app.require_client()
        while True:
            try:
                self.post_message(RunsLoaded(await client.list_runs(LIST_LIMIT)))
            except ApiError as err:
                self.post_message(ApiFailed("listing runs", err))
            await asyncio.sleep(self.watch_app.config.runs_poll_s)

    def on_runs_loaded(self, message: RunsLoaded) -> None:
        self.runs = {r.run_id: r for r in message.runs}
        self.selected &= set(self.runs)
        self.rebuild()

    def on_api_failed(self, message: ApiFailed) -> None:
        err = message.error
        self.query_one("#title", Static).update(run_text(f"runs: {err}", "bold red"))
        if err.status:  # unreachable servers are retried quietly; a refusal is worth a toast
            self.notify(f"{message.what}: {err.reason}", title=f"HTTP {err.status}", severity="error")

    # --- the table -------------------------------------------------------------------------------

    def rebuild(self) -> None:
        """Redraw every row, keeping the cursor on the run it was on (not on the same row number)."""
        table = self.table
        current = self.current_run_id()
        shown = [r for r in self.runs.values() if matches(r, self.filter_text)]
        cols = columns(differing_params(shown))
        if [c.key for c in cols] != [c.key for c in self._columns] or not table.columns:
            table.clear(columns=True)
            table.add_column(" ", key="selected")
            for col in cols:
                table.add_column(run_text(col.label), key=col.key)
            self._columns = cols
        else:
            table.clear()
        sort_col = next((c for c in cols if c.key == self.sort_key), cols[0])
        rows = sort_runs(shown, sort_col, self.sort_reverse)
        self.order = [r.run_id for r in rows]
        for run in rows:
            cells: list[str | Text] = [Text("●" if run.run_id in self.selected else " ", style="bold cyan")]
            cells += [run_text(c.text(run), STATUS_STYLE.get(run.status, "") if c.key == "status" else "")
                      for c in cols]
            table.add_row(*cells, key=run.run_id)
        if current in self.order:
            table.move_cursor(row=self.order.index(current), animate=False)
        self._title(sort_col)

    def _title(self, sort_col: Column) -> None:
        live = sum(r.status in RUNNING for r in self.runs.values())
        shown = f"{len(self.order)} of {len(self.runs)}" if self.filter_text else f"{len(self.runs)}"
        picked = f"   {len(self.selected)} selected" if self.selected else ""
        self.query_one("#title", Static).update(run_text(
            f"runs on {self.watch_app.require_client().config.base}: {shown} ({live} live){picked}"
            f"   sorted by {sort_col.label}{' ↓' if self.sort_reverse else ''}"
            f"{'   filter: ' + self.filter_text if self.filter_text else ''}"))

    def current_run_id(self) -> str | None:
        table = self.table
        if table.row_count == 0 or not self.order:
            return None
        row = min(max(table.cursor_row, 0), len(self.order) - 1)
        return self.order[row]

    def selected_run(self) -> RunSummary | None:
        run_id = self.current_run_id()
        return self.runs.get(run_id) if run_id else None

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        key = str(event.column_key.value)
        if key == "selected":
            return
        self.sort_reverse = not self.sort_reverse if key == self.sort_key else False
        self.sort_key = key
        self.rebuild()

    def action_cycle_sort(self) -> None:
        keys = [c.key for c in self._columns]
        self.sort_key = keys[(keys.index(self.sort_key) + 1) % len(keys)] if self.sort_key in keys else keys[0]
        # newest, longest, best first
        self.sort_reverse = self.sort_key not in ("status", "name", "run_id") and not self.sort_key.startswith("param:")
        self.rebuild()

    def action_toggle_select(self) -> None:
        run_id = self.current_run_id()
        if run_id is None:
            return
        self.selected ^= {run_id}
        row = self.table.cursor_row
        self.rebuild()
        self.table.move_cursor(row=min(row + 1, self.table.row_count - 1))

    # --- filter ----------------------------------------------------------------------------------

    def action_filter(self) -> None:
        box = self.query_one("#runs-filter", Input)
        box.add_class("shown")
        box.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#runs-filter", Input)
        box.value = ""
        box.remove_class("shown")
        self.filter_text = ""
        self.table.focus()
        self.rebuild()

    @on(Input.Changed, "#runs-filter")
    def filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value.strip()
        self.rebuild()

    @on(Input.Submitted, "#runs-filter")
    def filter_done(self, event: Input.Submitted) -> None:
        if not event.value.strip():
            self.action_clear_filter()
        else:
            self.table.focus()

    # --- opening runs ----------------------------------------------------------------------------

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    def action_open(self) -> None:
        run = self.selected_run()
        if run is not None:
            self.watch_app.open_run(run.run_id, run.status, replay=run.status not in RUNNING)

    def action_watch(self) -> None:
        run = self.selected_run()
        if run is not None:
            self.watch_app.open_run(run.run_id, run.status, replay=False)

    def action_replay(self) -> None:
        run = self.selected_run()
        if run is not None:
            self.watch_app.open_run(run.run_id, run.status, replay=True)

    def action_escalate(self, action: str) -> None:
        """Open the selected run live and ask there, so the command's status is in view."""
        run = self.selected_run()
        if run is not None:
            self.watch_app.open_run(run.run_id, run.status, replay=False, then=action)

    def picked(self) -> list[str]:
        """The selected runs in table order, or the one under the cursor."""
        chosen = [r for r in self.order if r in self.selected]
        current = self.current_run_id()
        return chosen or ([current] if current else [])

    def action_charts(self) -> None:
        from tui.screens.charts import ChartScreen

        run_id = self.current_run_id()
        if run_id is not None:
            self.app.push_screen(ChartScreen([run_id]))

    def action_compare(self) -> None:
        from tui.screens.charts import ChartScreen

        runs = self.picked()
        if len(runs) < 2:
            self.notify("select two runs or more with space, then c overlays their charts", severity="warning")
            return
        self.app.push_screen(ChartScreen(runs))

    def action_diff(self) -> None:
        from tui.screens.config_diff import ConfigDiffScreen

        runs = self.picked()
        current = self.current_run_id()
        if len(runs) == 1 and current and current not in runs:
            runs.append(current)
        if len(runs) != 2:
            self.notify("select two runs with space (or one, and put the cursor on the other), then =",
                        severity="warning")
            return
        self.app.push_screen(ConfigDiffScreen(runs[0], runs[1]))
