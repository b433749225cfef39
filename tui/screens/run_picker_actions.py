"""What the runs table's keys open: a run (live or replayed), charts of runs or of a group, the diff of
configs, the form that edits a run's group, tags and notes, the choice of metric columns."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from textual.widgets import DataTable

from tui.runs_query import value_id
from tui.runs_table import RUNNING, series_name

if TYPE_CHECKING:
    from tui.screens.run_picker import RunPickerScreen


class PickerActions:
    """Mixed into ``RunPickerScreen``: the actions that leave the table or change its rows' state."""

    @property
    def _picker(self) -> RunPickerScreen:
        """The screen these actions are mixed into (only ``RunPickerScreen`` mixes them in)."""
        return cast("RunPickerScreen", self)

    def action_toggle_select(self) -> None:
        picker = self._picker
        run_id = picker.current_run_id()
        if run_id is None:
            return
        picker.selected ^= {run_id}
        row = picker.table.cursor_row
        picker.rebuild()
        picker.table.move_cursor(row=min(row + 1, picker.table.row_count - 1))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    def action_open(self) -> None:
        picker = self._picker
        group = picker.current_group()
        if group is not None:  # a group's row opens into its runs, or closes
            vid = value_id(group.value)
            opened = picker.query_state.opened ^ {vid}
            if vid in opened and group.value is None:
                picker.notify("runs without this key: no filter picks them; sort by it to see them last",
                              severity="warning")
                return
            picker.requery(opened=opened)
            return
        run = picker.selected_run()
        if run is not None:
            picker.watch_app.open_run(run.run_id, run.status, replay=run.status not in RUNNING)

    def action_watch(self) -> None:
        picker = self._picker
        run = picker.selected_run()
        if run is not None:
            picker.watch_app.open_run(run.run_id, run.status, replay=False)

    def action_replay(self) -> None:
        picker = self._picker
        run = picker.selected_run()
        if run is not None:
            picker.watch_app.open_run(run.run_id, run.status, replay=True)

    def action_sweeps(self) -> None:
        from tui.screens.sweeps import SweepsScreen

        self._picker.app.push_screen(SweepsScreen())

    def action_escalate(self, action: str) -> None:
        """Open the selected run live and ask there, so the command's status is in view."""
        picker = self._picker
        run = picker.selected_run()
        if run is not None:
            picker.watch_app.open_run(run.run_id, run.status, replay=False, then=action)

    def picked(self) -> list[str]:
        """The selected runs in table order, or the one under the cursor."""
        picker = self._picker
        chosen = [r for r in dict.fromkeys(picker.order) if r in picker.selected]
        current = picker.current_run_id()
        return chosen or ([current] if current else [])

    def action_charts(self) -> None:
        picker = self._picker
        from tui.screens.charts import ChartScreen

        group = picker.current_group()
        if group is not None:
            from tui.screens.group_charts import GroupChartScreen

            if group.run_ids:
                metrics = list(dict.fromkeys(series_name(m) for m in picker.query_state.metrics))
                picker.app.push_screen(GroupChartScreen(picker.data.groups.by if picker.data.groups else "",
                                                        group.value, group.run_ids, metrics))
            return
        run_id = picker.current_run_id()
        if run_id is not None:
            picker.app.push_screen(ChartScreen([run_id]))

    def action_compare(self) -> None:
        picker = self._picker
        from tui.screens.charts import ChartScreen

        runs = picker.picked()
        if len(runs) < 2:
            picker.notify("select two runs or more with space, then c overlays their charts", severity="warning")
            return
        picker.app.push_screen(ChartScreen(runs))

    def action_diff(self) -> None:
        picker = self._picker
        from tui.screens.config_diff import ConfigDiffScreen

        runs = picker.picked()
        current = picker.current_run_id()
        if len(runs) == 1 and current and current not in runs:
            runs.append(current)
        if len(runs) < 2:
            picker.notify("select two runs or more with space (or one, and put the cursor on another), then =",
                          severity="warning")
            return
        picker.app.push_screen(ConfigDiffScreen(runs))

    def action_edit(self) -> None:
        picker = self._picker
        from tui.screens.run_edit import RunEditScreen

        run = picker.selected_run()
        if run is None:
            return

        def done(changed: bool | None) -> None:
            if changed:
                picker.requery()

        picker.app.push_screen(RunEditScreen(run), done)

    def action_pick_metrics(self) -> None:
        picker = self._picker
        from tui.screens.metric_picker import MetricPickerScreen

        known = picker.known_metrics
        if not known:
            picker.notify("no run on this page has a metric yet", severity="warning")
            return

        def done(keys: list[str] | None) -> None:
            if keys is not None:
                picker.set_metrics(keys or None)

        picker.app.push_screen(MetricPickerScreen(known, picker.shown_metrics()), done)
