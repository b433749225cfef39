"""What the runs table's keys open: a run (live or replayed), charts of runs or of a group, the diff of
configs, the form that edits a run's group, tags and notes, the choice of metric columns."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.widgets import DataTable

from tui.runs_query import value_id
from tui.runs_table import RUNNING, series_name

if TYPE_CHECKING:
    from tui.screens.run_picker import RunPickerScreen


class PickerActions:
    """Mixed into ``RunPickerScreen``: the actions that leave the table or change its rows' state."""

    def action_toggle_select(self: RunPickerScreen) -> None:
        run_id = self.current_run_id()
        if run_id is None:
            return
        self.selected ^= {run_id}
        row = self.table.cursor_row
        self.rebuild()
        self.table.move_cursor(row=min(row + 1, self.table.row_count - 1))

    def on_data_table_row_selected(self: RunPickerScreen, event: DataTable.RowSelected) -> None:
        self.action_open()

    def action_open(self: RunPickerScreen) -> None:
        group = self.current_group()
        if group is not None:  # a group's row opens into its runs, or closes
            vid = value_id(group.value)
            opened = self.query_state.opened ^ {vid}
            if vid in opened and group.value is None:
                self.notify("runs without this key: no filter picks them; sort by it to see them last",
                            severity="warning")
                return
            self.requery(opened=opened)
            return
        run = self.selected_run()
        if run is not None:
            self.watch_app.open_run(run.run_id, run.status, replay=run.status not in RUNNING)

    def action_watch(self: RunPickerScreen) -> None:
        run = self.selected_run()
        if run is not None:
            self.watch_app.open_run(run.run_id, run.status, replay=False)

    def action_replay(self: RunPickerScreen) -> None:
        run = self.selected_run()
        if run is not None:
            self.watch_app.open_run(run.run_id, run.status, replay=True)

    def action_escalate(self: RunPickerScreen, action: str) -> None:
        """Open the selected run live and ask there, so the command's status is in view."""
        run = self.selected_run()
        if run is not None:
            self.watch_app.open_run(run.run_id, run.status, replay=False, then=action)

    def picked(self: RunPickerScreen) -> list[str]:
        """The selected runs in table order, or the one under the cursor."""
        chosen = [r for r in dict.fromkeys(self.order) if r in self.selected]
        current = self.current_run_id()
        return chosen or ([current] if current else [])

    def action_charts(self: RunPickerScreen) -> None:
        from tui.screens.charts import ChartScreen

        group = self.current_group()
        if group is not None:
            from tui.screens.group_charts import GroupChartScreen

            if group.run_ids:
                metrics = list(dict.fromkeys(series_name(m) for m in self.query_state.metrics))
                self.app.push_screen(GroupChartScreen(self.data.groups.by if self.data.groups else "",
                                                      group.value, group.run_ids, metrics))
            return
        run_id = self.current_run_id()
        if run_id is not None:
            self.app.push_screen(ChartScreen([run_id]))

    def action_compare(self: RunPickerScreen) -> None:
        from tui.screens.charts import ChartScreen

        runs = self.picked()
        if len(runs) < 2:
            self.notify("select two runs or more with space, then c overlays their charts", severity="warning")
            return
        self.app.push_screen(ChartScreen(runs))

    def action_diff(self: RunPickerScreen) -> None:
        from tui.screens.config_diff import ConfigDiffScreen

        runs = self.picked()
        current = self.current_run_id()
        if len(runs) == 1 and current and current not in runs:
            runs.append(current)
        if len(runs) < 2:
            self.notify("select two runs or more with space (or one, and put the cursor on another), then =",
                        severity="warning")
            return
        self.app.push_screen(ConfigDiffScreen(runs))

    def action_edit(self: RunPickerScreen) -> None:
        from tui.screens.run_edit import RunEditScreen

        run = self.selected_run()
        if run is None:
            return

        def done(changed: bool | None) -> None:
            if changed:
                self.requery()

        self.app.push_screen(RunEditScreen(run), done)

    def action_pick_metrics(self: RunPickerScreen) -> None:
        from tui.screens.metric_picker import MetricPickerScreen

        known = self.known_metrics
        if not known:
            self.notify("no run on this page has a metric yet", severity="warning")
            return

        def done(keys: list[str] | None) -> None:
            if keys is not None:
                self.set_metrics(keys or None)

        self.app.push_screen(MetricPickerScreen(known, self.shown_metrics()), done)
