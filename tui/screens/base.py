"""What the live view and the replay share: a run's state, its dashboard, and the log filter."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from textual import on
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Input

from leyline import Event
from tui.state import RunState
from tui.widgets.dashboard import RunDashboard

if TYPE_CHECKING:
    from tui.app import EsperWatch


def left(screen: Screen[Any]) -> bool:
    """Whether ``screen`` was left (popped, dismissed) while one of its reads was under way: its widgets are
    being removed, so what the read brought is dropped rather than drawn on them."""
    return screen not in screen.app.screen_stack


class DashboardScreen(Screen[None]):
    """A screen showing one run's ``RunDashboard``; ``/`` filters its event log, escape clears."""

    BINDINGS = [
        Binding("slash", "filter", "filter"),
        Binding("escape", "clear_filter", "clear filter", show=False),
        # Not in the footer: it is full at 120 columns (help and the README name it).
        Binding("g", "charts", "charts", show=False),
    ]
    events: list[Event] | None = None
    """Every event of the run when the screen holds them (a replay): its charts are computed from them."""

    def __init__(self, run_id: str, name: str) -> None:
        super().__init__(name=name)
        self.run_id = run_id
        self.state = RunState(run_id, self.watch_app.config.limits)

    @property
    def watch_app(self) -> EsperWatch:
        return cast("EsperWatch", self.app)

    @property
    def dashboard(self) -> RunDashboard:
        return self.query_one(RunDashboard)

    def artifact_url(self) -> str | None:
        profile = self.state.profile
        if profile is None or not profile.artifact:
            return None
        client = self.watch_app.client
        # No server (a replay): its name alone, never a link the run chose.
        return client.artifact_url(self.run_id, profile.artifact) if client else profile.artifact.rsplit("/", 1)[-1]

    def action_charts(self) -> None:
        from tui.screens.charts import ChartScreen  # the charts screen opens run views: no import cycle

        self.app.push_screen(ChartScreen([self.run_id], {self.run_id: self.events} if self.events else None))

    def action_filter(self) -> None:
        self.dashboard.toggle_filter(True).focus()

    def action_clear_filter(self) -> None:
        box = self.dashboard.toggle_filter(False)
        box.value = ""
        self.dashboard.set_filter("", self.state)

    @on(Input.Changed, "#filter")
    def filter_changed(self, event: Input.Changed) -> None:
        self.dashboard.set_filter(event.value, self.state)

    @on(Input.Submitted, "#filter")
    def filter_done(self, event: Input.Submitted) -> None:
        if not event.value:
            self.action_clear_filter()
        self.set_focus(None)
