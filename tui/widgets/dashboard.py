"""The run dashboard: every panel of one run, laid out for a 120×40 terminal and up.

``show`` is called by a timer, never per event: it pushes fresh views only into the panels the
folded events marked dirty, and the log receives only the lines that arrived since last time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import Input, Static

from tui.format import LogFilter
from tui.safe_text import run_text
from tui.state import RunState
from tui.views import (
    Staleness,
    anomaly_rows,
    command_rows,
    env_rows,
    header_view,
    health_view,
    ppo_view,
    profile_view,
    timeline_rows,
)
from tui.widgets.event_log import EventLog
from tui.widgets.header import AnomalyStrip, RunHeader
from tui.widgets.lifecycle import CommandPanel, ProfilePanel, SeedTimeline
from tui.widgets.loop import LoopPanel
from tui.widgets.metrics import EnvGrid, HealthPanel, PPOPanel
from tui.widgets.ranks import RanksPanel

TIMELINE_ROWS = 40


@dataclass(frozen=True)
class StreamInfo:
    """What the screen knows about its source of events, for the header."""

    connection: str
    staleness: Staleness
    reconnects: int = 0
    artifact_url: str | None = None
    token_refused: bool = False
    """The server does not take this console's token for commands (they would be refused)."""


def _boxed(widget: Widget, title: str) -> Widget:
    widget.border_title = title
    widget.add_class("panel")
    return widget


class RunDashboard(Vertical):
    """Header, anomalies strip, env grid, seed timeline, event log, ranks (of a run of several),
    PPO/health/commands/profile."""

    DEFAULT_CSS = """
    RunDashboard { height: 1fr; }
    RunDashboard .panel { border: round $primary-background-lighten-2; border-title-color: $text-accent; padding: 0 1; }
    RunDashboard #columns { height: 1fr; }
    RunDashboard #left { width: 3fr; }
    RunDashboard #right { width: 2fr; min-width: 46; max-width: 72; }
    RunDashboard #envs { height: auto; max-height: 16; }
    RunDashboard #timeline { height: 1fr; min-height: 5; }
    RunDashboard #log { height: 2fr; min-height: 6; }
    RunDashboard #filter { display: none; height: 3; }
    RunDashboard #filter.-shown { display: block; }
    RunDashboard #ppo, RunDashboard #health, RunDashboard #commands { height: auto; }
    RunDashboard #profile { height: auto; min-height: 4; }
    RunDashboard #alert-banner { display: none; height: 1; background: $error; color: $text; text-style: bold; }
    RunDashboard #alert-banner.-shown { display: block; }
    RunDashboard #ranks { display: none; height: auto; }
    RunDashboard #ranks.-shown { display: block; }
    RunDashboard #loop { display: none; height: auto; }
    RunDashboard.-loop #loop { display: block; }
    RunDashboard.-plain #envs, RunDashboard.-plain #timeline, RunDashboard.-plain #ppo,
    RunDashboard.-plain #health { display: none; }
    """

    def __init__(self, log_lines: int, **kwargs: Any) -> None:  # Widget's own
        super().__init__(**kwargs)
        self.log_lines = log_lines
        self._rendered_total = 0
        self.renders = 0  # how many times ``show`` ran: the coalescing is visible in tests

    def compose(self) -> ComposeResult:
        yield RunHeader(id="header")
        yield Static("", id="alert-banner", markup=False)
        yield AnomalyStrip(id="anomalies")
        with Horizontal(id="columns"):
            with Vertical(id="left"):
                yield _boxed(EnvGrid(id="envs"), "envs")
                with VerticalScroll(id="timeline") as timeline:
                    timeline.border_title = "seed lifecycle"
                    timeline.add_class("panel")
                    yield SeedTimeline(id="timeline-body")
                yield Input(placeholder="filter: words, !word, kind:ppo, sev:warning, env:2 (esc clears)",
                            id="filter")
                yield _boxed(EventLog(self.log_lines, id="log"), "events")
            with VerticalScroll(id="right"):
                yield _boxed(RanksPanel(id="ranks"), "ranks")
                yield _boxed(LoopPanel(id="loop"), "metrics")
                yield _boxed(PPOPanel(id="ppo"), "PPO health")
                yield _boxed(HealthPanel(id="health"), "gradients & LSTM")
                yield _boxed(CommandPanel(id="commands"), "commands")
                yield _boxed(ProfilePanel(id="profile"), "profile")

    def show(self, state: RunState, stream: StreamInfo, everything: bool = False) -> None:
        """Push the views of the dirty panels (all of them with ``everything``)."""
        dirty = state.take_dirty()
        self.renders += 1
        q = self.query_one
        q(RunHeader).view = header_view(state, stream.connection, stream.staleness, stream.reconnects,
                                        token_refused=stream.token_refused)
        if everything or "envs" in dirty:
            q(EnvGrid).rows = env_rows(state)
        if everything or "timeline" in dirty:
            q(SeedTimeline).rows = timeline_rows(state, TIMELINE_ROWS)
        if everything or "anomalies" in dirty:
            q(AnomalyStrip).rows = anomaly_rows(state)
        if everything or "ppo" in dirty:
            q(PPOPanel).view = ppo_view(state)
        if everything or "health" in dirty:
            q(HealthPanel).view = health_view(state)
        if everything or "commands" in dirty:
            q(CommandPanel).rows = command_rows(state)
        if everything or "profile" in dirty:
            q(ProfilePanel).view = profile_view(state, stream.artifact_url)
        if everything or "alerts" in dirty:
            banner = q("#alert-banner", Static)
            banner.update(run_text(state.alerts.banner()))
            banner.set_class(bool(state.alerts.firing), "-shown")
        if everything or "metrics" in dirty or "header" in dirty:
            self._show_loop(state)
        if state.ranks.several:  # every tick: the heartbeats' ages move with the clock
            panel = q(RanksPanel)
            panel.set_class(True, "-shown")
            panel.hung = state.alerts.hung_ranks()
            panel.rows = state.ranks.rows()
        log = q(EventLog)
        if everything or self._rendered_total > state.logged_total:
            log.refilter(log.log_filter, state.log)
        else:
            fresh = min(state.logged_total - self._rendered_total, len(state.log))
            if fresh:
                log.add(list(state.log)[-fresh:])
        self._rendered_total = state.logged_total
        folded = f", {state.metric_steps:,} metric steps folded" if state.metric_steps else ""
        log.border_title = run_text(f"events ({state.events_total:,}{folded})" + (
            f" filter: {log.log_filter.text}" if log.log_filter.text else ""))

    def next_panel(self) -> str:
        """Scroll the right column so that its next panel is at its top (after the last, the first again):
        on a short terminal the commands and profile panels are one key away. Returns that panel's id."""
        right = self.query_one("#right", VerticalScroll)
        panels = [w for w in right.children if w.display and w.size.height]
        if right.scroll_y >= right.max_scroll_y:  # at the end: the later panels cannot come any higher
            target = panels[0]
        else:
            target = next((w for w in panels if w.virtual_region.y > right.scroll_y), panels[0])
        right.scroll_to(y=target.virtual_region.y, animate=False)
        return target.id or ""

    def _show_loop(self, state: RunState) -> None:
        """A run with metrics or commands of its own shows them; one with no Esper kinds hides Esper's panels."""
        panel = self.query_one(LoopPanel)
        panel.rows = tuple(state.loop.rows())
        panel.offered = tuple(state.loop.offered())
        own = bool(state.loop.metrics or state.loop.declared)
        self.set_class(own, "-loop")
        self.set_class(own and not state.esper, "-plain")

    def set_filter(self, text: str, state: RunState) -> None:
        self.query_one(EventLog).refilter(LogFilter(text), state.log)
        self._rendered_total = state.logged_total

    def toggle_filter(self, show: bool) -> Input:
        box = self.query_one("#filter", Input)
        box.set_class(show, "-shown")
        return box
