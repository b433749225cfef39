"""The runs table: a page of runs from the server, in the server's order and filter (``sort=``, ``q=``),
with the metrics they share, the config values that tell them apart, project, group and tags; or rows of
groups (count, mean ± SD of each metric) that open into their runs. Select several to overlay their
charts or diff their configs; edit a run's group, tags and notes."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from leyline.groups import GroupRow
from leyline.runs import RunSummary
from leyline.runs_table import table_columns
from tui.client import ApiError
from tui.messages import ApiFailed, RunsLoaded
from tui.runs_query import PAGE, TableData, TableQuery, fetch, value_id
from tui.runs_table import (
    FIELDS,
    RUNNING,
    Column,
    columns,
    group_keys,
    metric_column,
    sort_param,
)
from tui.safe_text import run_text
from tui.screens.run_picker_actions import PickerActions
from tui.screens.sort_picker import SortPickerScreen

if TYPE_CHECKING:
    from tui.app import EsperWatch

GROUP_ROW = "group:"
"""Row keys of group rows start with it (a run's row key is its id)."""


class RunsTable(DataTable):
    """A row table where home and end go to the first and last run (a plain table scrolls sideways)."""

    BINDINGS = [
        Binding("home", "scroll_top", "first", show=False),
        Binding("end", "scroll_bottom", "last", show=False),
    ]


class RunPickerScreen(PickerActions, Screen[None]):
    """Choose runs: enter opens one (a live one live, a finished one as a replay), space selects several."""

    BINDINGS = [
        Binding("enter", "open", "open"),
        Binding("w", "watch", "watch live", show=False),
        Binding("v", "replay", "replay", show=False),
        Binding("g", "charts", "charts"),
        Binding("space", "toggle_select", "select"),
        Binding("c", "compare", "compare", show=False),
        Binding("equals_sign", "diff", "diff configs"),
        Binding("s", "pick_sort", "sort by…"),
        Binding("b", "best_last", "best/last", show=False),
        Binding("m", "pick_metrics", "metrics", show=False),
        Binding("u", "cycle_group", "group"),
        Binding("e", "edit", "edit"),
        Binding("S", "sweeps", "sweeps"),
        Binding("slash", "filter", "filter"),
        Binding("right_square_bracket", "page(1)", "next page", show=False),
        Binding("left_square_bracket", "page(-1)", "previous page", show=False),
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
        self.query_state = TableQuery()
        self.data = TableData(self.query_state)
        self.runs: dict[str, RunSummary] = {}
        self.order: list[str] = []  # row keys as the table shows them: run ids, or GROUP_ROW + value id
        self.selected: set[str] = set()
        self.sort_key = ""
        self.sort_reverse = False
        self.field = FIELDS[0]
        self.metric_keys: list[str] | None = None  # None: the metrics the page's runs share
        self.page_metrics: list[str] = []  # what the last page of runs (not of groups) shares
        self.known_metrics: list[str] = []  # every metric of that page's runs
        self.param_keys: list[str] = []
        self._columns: list[Column] = []
        self.error: str | None = None

    @property
    def watch_app(self) -> EsperWatch:
        return cast("EsperWatch", self.app)

    @property
    def table(self) -> DataTable:
        return self.query_one("#runs", DataTable)

    @property
    def filter_text(self) -> str:
        return self.query_state.q

    def compose(self) -> ComposeResult:
        yield Static("runs: loading…", id="title")
        yield Input(placeholder="filter: project:P group:G tag:T status:S name~x config.lr>=0.01 val_loss.best<0.4",
                    id="runs-filter")
        yield RunsTable(cursor_type="row", zebra_stripes=True, id="runs")
        yield Footer()

    def on_mount(self) -> None:
        self.table.focus()
        self.requery()

    # --- what is asked of the server -------------------------------------------------------------

    def shown_metrics(self) -> list[str]:
        return self.metric_keys if self.metric_keys is not None else self.page_metrics

    def _metric_columns(self) -> tuple[str, ...]:
        return tuple(metric_column(k, self.field).key for k in self.shown_metrics())

    def requery(self, **changes: Any) -> None:  # TableQuery's own fields
        """Ask again now (a new filter, order, page or grouping), then every few seconds."""
        fields: dict[str, Any] = {"sort": sort_param(self.sort_key, self.sort_reverse) if self.sort_key else "",
                  "metrics": self._metric_columns(), **changes}
        self.query_state = replace(self.query_state, **fields)
        self.poll_runs(self.query_state)

    @work(exclusive=True, group="runs")
    async def poll_runs(self, query: TableQuery) -> None:
        client = self.watch_app.require_client()
        while True:
            try:
                self.post_message(RunsLoaded(await fetch(client, query)))
            except ApiError as err:
                self.post_message(ApiFailed("listing runs", err))
            await asyncio.sleep(self.watch_app.config.runs_poll_s)

    def on_runs_loaded(self, message: RunsLoaded) -> None:
        if message.data.query != self.query_state:
            return  # an answer to what was asked before
        self.error = None
        self.data = message.data
        self.runs = {r.run_id: r for r in message.data.runs}
        self.selected &= set(self.runs)
        if self.data.groups is None:  # grouped, the runs shown are those of the groups opened: not a page
            page = table_columns(self.data.runs)
            self.page_metrics, self.param_keys, self.known_metrics = (page.metrics, page.params,
                                                                   sorted(set(page.names.values())))
        if self.data.groups is None and self._metric_columns() != self.query_state.metrics:
            self.requery()  # what a grouping would summarise follows the page's columns: asked from now on
        self.rebuild()

    def on_api_failed(self, message: ApiFailed) -> None:
        err = message.error
        self.error = err.reason
        self.query_one("#title", Static).update(run_text(f"runs: {err}", style="bold red"))
        if err.status and err.status != 400:  # a filter's mistake is in the title; a refusal is worth a toast
            self.notify(f"{message.what}: {err.reason}", title=f"HTTP {err.status}", severity="error")

    # --- the table -------------------------------------------------------------------------------

    def rebuild(self) -> None:
        """Redraw every row, keeping the cursor on the row it was on (not on the same row number)."""
        table = self.table
        current = self.current_key()
        cols = columns(self.shown_metrics(), self.field, self.param_keys)
        if [c.key for c in cols] != [c.key for c in self._columns] or not table.columns:
            table.clear(columns=True)
            table.add_column(" ", key="selected")
            for col in cols:
                arrow = (" ↓" if self.sort_reverse else " ↑") if col.key == self.sort_key else ""
                # a metric's or a config key's name is the run's text
                table.add_column(run_text(col.label + arrow), key=col.key)
            self._columns = cols
        else:
            table.clear()
        self.order = []
        if self.data.groups is None:
            for run in self.data.runs:
                self._add_run(run, cols)
        else:
            for row in self._sorted_groups():
                vid = value_id(row.value)
                opened = vid in self.query_state.opened
                cells = [run_text("▾" if opened else "▸", style="bold magenta")]
                cells += [c.group_text(row) if c.group_text else run_text("") for c in cols]
                table.add_row(*cells, key=GROUP_ROW + vid)
                self.order.append(GROUP_ROW + vid)
                for run in self.data.members.get(vid, []):
                    self._add_run(run, cols, indent=True)
        if current in self.order:
            table.move_cursor(row=self.order.index(current), animate=False)
        self._title()

    def _add_run(self, run: RunSummary, cols: list[Column], indent: bool = False) -> None:
        mark = "●" if run.run_id in self.selected else ("·" if indent else " ")
        cells = [run_text(mark, style="bold cyan"), *(c.text(run) for c in cols)]
        if indent:
            cells[2] = run_text("  ") + cells[2]
        key = run.run_id if run.run_id not in self.order else f"{run.run_id}#{len(self.order)}"
        self.table.add_row(*cells, key=key)
        self.order.append(run.run_id)

    def _sorted_groups(self) -> list[GroupRow]:
        """Group rows sorted here (they are few): by a metric's mean, else as the server gave them."""
        rows = list(self.data.groups.groups) if self.data.groups else []
        stats = [r.metrics.get(self.sort_key) for r in rows]
        if self.sort_key in self.query_state.metrics:
            known = sorted((s.mean, i) for i, s in enumerate(stats) if s is not None and s.mean is not None)
            ordered = [rows[i] for _, i in (reversed(known) if self.sort_reverse else known)]
            return ordered + [r for r in rows if r not in ordered]
        return rows[::-1] if self.sort_reverse and self.sort_key in ("name", "group", "project") else rows

    def _title(self) -> None:
        data = self.data
        live = sum(r.status in RUNNING for r in data.runs)
        if data.groups is not None:
            n = len(data.groups.groups)
            what = f"{n} group{'s' if n != 1 else ''} by {data.groups.by} of {data.total} runs"
        else:
            first = self.query_state.offset + 1 if data.runs else 0
            what = f"runs {first}–{self.query_state.offset + len(data.runs)} of {data.total} ({live} live)"
        picked = f"   {len(self.selected)} selected" if self.selected else ""
        sort = f"   sorted by {self.sort_key}{' ↓' if self.sort_reverse else ''}" if self.sort_key else ""
        title = run_text(f"{what}{picked}{sort}   metrics: {self.field}")
        if self.filter_text:
            title.append("   filter: ").append(self.filter_text, style="bold")
        self.query_one("#title", Static).update(title)

    def current_key(self) -> str | None:
        table = self.table
        if table.row_count == 0 or not self.order:
            return None
        return self.order[min(max(table.cursor_row, 0), len(self.order) - 1)]

    def current_run_id(self) -> str | None:
        key = self.current_key()
        return None if key is None or key.startswith(GROUP_ROW) else key

    def current_group(self) -> GroupRow | None:
        key = self.current_key()
        if key is None or not key.startswith(GROUP_ROW) or self.data.groups is None:
            return None
        return next((g for g in self.data.groups.groups if GROUP_ROW + value_id(g.value) == key), None)

    def selected_run(self) -> RunSummary | None:
        run_id = self.current_run_id()
        return self.runs.get(run_id) if run_id else None

    # --- order, columns, grouping, pages ---------------------------------------------------------

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        key = str(event.column_key.value)
        column = next((c for c in self._columns if c.key == key), None)
        if column is not None and column.sortable:
            self._sort_by(key, not self.sort_reverse if key == self.sort_key else key == "started")

    def _sort_by(self, key: str, reverse: bool) -> None:
        self.sort_key, self.sort_reverse = key, reverse
        self._columns = []  # the header's arrow moves
        self.requery(offset=0)

    def action_pick_sort(self) -> None:
        """Sort by a column chosen by name (the one sorted by already: the other way)."""
        keys = [c.key for c in self._columns if c.sortable] or ["status"]

        def chosen(key: str | None) -> None:
            if key is not None:  # newest first; anything else from its lowest (a loss's best)
                self._sort_by(key, not self.sort_reverse if key == self.sort_key else key == "started")

        self.app.push_screen(SortPickerScreen(keys, self.sort_key, self.sort_reverse), chosen)

    def action_best_last(self) -> None:
        self.field = FIELDS[(FIELDS.index(self.field) + 1) % len(FIELDS)]
        if self.sort_key.endswith(tuple(f".{f}" for f in FIELDS)):
            self.sort_key = self.sort_key.rsplit(".", 1)[0] + "." + self.field
        self.requery()

    def action_cycle_group(self) -> None:
        keys = group_keys(self.param_keys)
        at = keys.index(self.query_state.group_by) if self.query_state.group_by in keys else 0
        self.requery(group_by=keys[(at + 1) % len(keys)], opened=frozenset(), offset=0)

    def action_page(self, step: int) -> None:
        offset = self.query_state.offset + step * PAGE
        if self.data.groups is None and 0 <= offset < max(self.data.total, 1):
            self.requery(offset=offset)

    def set_metrics(self, keys: list[str] | None) -> None:
        self.metric_keys = keys
        self.requery()

    # --- filter ----------------------------------------------------------------------------------

    def action_filter(self) -> None:
        box = self.query_one("#runs-filter", Input)
        box.add_class("shown")
        box.value = self.filter_text
        box.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#runs-filter", Input)
        box.value = ""
        box.remove_class("shown")
        self.table.focus()
        if self.filter_text:
            self.requery(q="", offset=0, opened=frozenset())

    @on(Input.Submitted, "#runs-filter")
    def filter_done(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text:
            self.action_clear_filter()
            return
        self.table.focus()
        self.requery(q=text, offset=0, opened=frozenset())
