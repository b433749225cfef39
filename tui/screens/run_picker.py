"""The run picker: every run the server knows, live first, sortable by any column."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from tui.client import ApiError, RunSummary
from tui.messages import ApiFailed, RunsLoaded

if TYPE_CHECKING:
    from tui.app import EsperWatch

COLUMNS = (("status", "status"), ("run", "run_id"), ("name", "name"), ("started", "started_at"),
           ("ended", "ended_at"), ("events", "events"))
STATUS_ORDER = {"live": 0, "degraded": 1, "lost": 2, "failed": 3, "interrupted": 4, "finished": 5}
STATUS_STYLE = {"live": "bold green", "degraded": "bold yellow", "lost": "bold red", "failed": "red",
                "interrupted": "yellow", "finished": "blue"}
RUNNING = ("live", "degraded")


def _when(ts: float | None) -> str:
    return "—" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def sort_value(run: RunSummary, field: str) -> Any:
    """The key a column sorts by; missing times sort first so that ``reverse`` puts them last."""
    if field == "status":
        return STATUS_ORDER.get(run.status, len(STATUS_ORDER))
    if field == "events":
        return run.events
    value = getattr(run, field)
    return (value is not None, value or 0) if field.endswith("_at") else value


class RunPickerScreen(Screen[None]):
    """Choose a run: enter or a click opens it (a live one live, a finished one as a replay)."""

    BINDINGS = [
        Binding("enter", "open", "open"),
        Binding("w", "watch", "watch live"),
        Binding("v", "replay", "replay"),
        Binding("s", "cycle_sort", "sort"),
        Binding("d", "escalate('debug')", "debug window"),
        Binding("p", "escalate('profile')", "profile…"),
    ]
    DEFAULT_CSS = """
    RunPickerScreen #title { height: 1; padding: 0 1; background: $boost; }
    RunPickerScreen DataTable { height: 1fr; }
    """

    def __init__(self) -> None:
        super().__init__(name="runs")
        self.runs: dict[str, RunSummary] = {}
        self.sort_field = "status"
        self.sort_reverse = False

    @property
    def watch_app(self) -> EsperWatch:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield Static("runs: loading…", id="title")
        yield DataTable(cursor_type="row", zebra_stripes=True, id="runs")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for label, field in COLUMNS:
            table.add_column(label, key=field)
        self.poll_runs()

    @work(exclusive=True, group="runs")
    async def poll_runs(self) -> None:
        client = self.watch_app.require_client()
        while True:
            try:
                self.post_message(RunsLoaded(await client.list_runs()))
            except ApiError as err:
                self.post_message(ApiFailed("listing runs", err))
            await asyncio.sleep(self.watch_app.config.runs_poll_s)

    def on_runs_loaded(self, message: RunsLoaded) -> None:
        self.runs = {r.run_id: r for r in message.runs}
        table = self.query_one(DataTable)
        selected = self.selected_run()
        table.clear()
        for run in message.runs:
            table.add_row(Text(run.status, style=STATUS_STYLE.get(run.status, "")), run.run_id,
                          run.name or "—", _when(run.started_at), _when(run.ended_at),
                          f"{run.events:,}", key=run.run_id)
        self._sort()
        if selected is not None and selected.run_id in self.runs:
            table.move_cursor(row=table.get_row_index(selected.run_id))

    def on_api_failed(self, message: ApiFailed) -> None:
        err = message.error
        self.query_one("#title", Static).update(Text(f"runs: {err}", style="bold red"))
        if err.status:  # unreachable servers are retried quietly; a refusal is worth a toast
            self.notify(f"{message.what}: {err.reason}", title=f"HTTP {err.status}", severity="error")

    def _sort(self) -> None:
        field = self.sort_field
        table = self.query_one(DataTable)
        rows = sorted(self.runs.values(), key=lambda r: (sort_value(r, field), r.run_id),
                      reverse=self.sort_reverse)
        order = {r.run_id: i for i, r in enumerate(rows)}
        table.sort("run_id", key=lambda run_id: order.get(run_id, len(order)))
        live = sum(r.status in RUNNING for r in self.runs.values())
        self.query_one("#title", Static).update(
            f"runs on {self.watch_app.require_client().config.base}: {len(self.runs)} ({live} live)"
            f"   sorted by {field}{' ↓' if self.sort_reverse else ''}   "
            "enter opens · w watch live · v replay · s or a click on a header sorts")

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        field = str(event.column_key.value)
        self.sort_reverse = not self.sort_reverse if field == self.sort_field else False
        self.sort_field = field
        self._sort()

    def action_cycle_sort(self) -> None:
        fields = [f for _, f in COLUMNS]
        self.sort_field = fields[(fields.index(self.sort_field) + 1) % len(fields)]
        self.sort_reverse = self.sort_field in ("started_at", "ended_at", "events")  # newest, biggest first
        self._sort()

    def selected_run(self) -> RunSummary | None:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        return self.runs.get(str(key.value))

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

    def action_escalate(self, action: str) -> None:
        """Open the selected run live and ask there, so the command's status is in view."""
        run = self.selected_run()
        if run is not None:
            self.watch_app.open_run(run.run_id, run.status, replay=False, then=action)

    def action_replay(self) -> None:
        run = self.selected_run()
        if run is not None:
            self.watch_app.open_run(run.run_id, run.status, replay=True)
