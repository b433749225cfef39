"""Replay of a finished run: the same dashboard, stepped or scrubbed through the stored events."""

from __future__ import annotations

import bisect

from rich.console import RenderableType
from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import reactive
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Footer, Input

from leyline import Event
from tui.client import ApiError
from tui.messages import ApiFailed, ReplayLoaded
from tui.screens.base import DashboardScreen
from tui.state import RunState
from tui.widgets.dashboard import RunDashboard, StreamInfo


class Scrubber(Widget):
    """Where the replay stands; a click anywhere on the bar jumps there."""

    DEFAULT_CSS = "Scrubber { height: 1; padding: 0 1; background: $boost; }"

    position: reactive[int] = reactive(0)
    total: reactive[int] = reactive(0)
    label: reactive[str] = reactive("")

    def render(self) -> RenderableType:
        head = Text(f"replay {self.position:,}/{self.total:,} {self.label} ", style="bold magenta")
        width = max(self.size.width - 2 - len(head), 10)
        filled = round(width * self.position / self.total) if self.total else 0
        head.append("━" * filled, style="magenta")
        head.append("─" * (width - filled), style="dim")
        return head

    def on_click(self, event: events.Click) -> None:
        head = len(f"replay {self.position:,}/{self.total:,} {self.label} ") + 1
        width = max(self.size.width - 2 - head + 1, 10)
        fraction = min(max((event.x - head) / width, 0.0), 1.0)
        screen = self.screen
        if isinstance(screen, ReplayScreen):
            screen.seek(round(fraction * self.total))


class ReplayScreen(DashboardScreen):
    """A finished run from its stored events (or a local run log); nothing here talks to the trainer."""

    # Priority: the log would otherwise take arrows and home/end for scrolling. ``check_action``
    # hands them back to the filter box while it is being typed in.
    BINDINGS = [
        Binding("right", "step(1)", "+1 event", priority=True),
        Binding("left", "step(-1)", "-1 event", priority=True),
        Binding("right_square_bracket", "epoch(1)", "+1 epoch", priority=True),
        Binding("left_square_bracket", "epoch(-1)", "-1 epoch", priority=True),
        Binding("home", "seek_to(0)", "start", show=False, priority=True),
        Binding("end", "seek_end", "end", show=False, priority=True),
        Binding("space", "play", "play/pause", priority=True),
    ]
    REPLAY_ACTIONS = frozenset({"step", "epoch", "seek_to", "seek_end", "play"})

    def __init__(self, run_id: str, events: list[Event] | None = None) -> None:
        super().__init__(run_id, name=f"replay:{run_id}")
        self.events: list[Event] = events or []
        self.epochs: list[int] = []  # running max of the epoch up to each event: sorted, for [ and ]
        self.position = 0
        self._player: Timer | None = None
        self._loaded = events is not None

    def compose(self) -> ComposeResult:
        yield RunDashboard(self.watch_app.config.limits.log_lines, id="dashboard")
        yield Scrubber(id="scrubber")
        yield Footer()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in self.REPLAY_ACTIONS and isinstance(self.focused, Input):
            return False
        return True

    def on_mount(self) -> None:
        if self._loaded:
            self.post_message(ReplayLoaded(self.events))
        else:
            self.query_one(Scrubber).label = "loading…"
            self.load()

    @work(exclusive=True, group="replay")
    async def load(self) -> None:
        client = self.watch_app.require_client()
        try:
            stored = await client.all_events(self.run_id, self.watch_app.config.max_replay_events)
        except ApiError as err:
            self.post_message(ApiFailed(f"loading {self.run_id}", err))
            return
        self.post_message(ReplayLoaded(stored))

    def on_replay_loaded(self, message: ReplayLoaded) -> None:
        self.events = message.events
        self.epochs, top = [], 0
        for e in self.events:
            top = max(top, e.epoch)
            self.epochs.append(top)
        self.query_one(Scrubber).total = len(self.events)
        self.seek(len(self.events))  # open at the end: the run as it finished

    def on_api_failed(self, message: ApiFailed) -> None:
        self.query_one(Scrubber).label = "could not load"
        self.notify(f"{message.what}: {message.error.reason}", severity="error",
                    title=f"HTTP {message.error.status}" if message.error.status else "server unreachable")

    def seek(self, target: int) -> None:
        """Show the run as it stood after ``target`` events; backwards re-folds from the start."""
        target = min(max(target, 0), len(self.events))
        if target < self.position:
            self.state = RunState(self.run_id, self.watch_app.config.limits)
            self.position = 0
        self.state.apply_all(self.events[self.position:target])
        self.position = target
        scrub = self.query_one(Scrubber)
        scrub.position = target
        current = self.events[target - 1] if target else None
        scrub.label = f"epoch {current.epoch} seq {current.seq}" if current else "start"
        self.dashboard.show(self.state, StreamInfo("replay", "REPLAY", artifact_url=self.artifact_url()),
                            everything=True)

    def action_step(self, delta: int) -> None:
        self.seek(self.position + delta)

    def action_epoch(self, delta: int) -> None:
        """Jump to the end of the next epoch, or back to the end of the previous one."""
        if not self.events:
            return
        current = self.epochs[self.position - 1] if self.position else -1
        if delta > 0:
            nxt = bisect.bisect_right(self.epochs, current)
            if nxt < len(self.epochs):
                self.seek(bisect.bisect_right(self.epochs, self.epochs[nxt]))
        else:
            self.seek(bisect.bisect_left(self.epochs, current) if current >= 0 else 0)

    def action_seek_to(self, position: int) -> None:
        self.seek(position)

    def action_seek_end(self) -> None:
        self.seek(len(self.events))

    def action_play(self) -> None:
        if self._player is not None:
            self._player.stop()
            self._player = None
            return
        if self.position >= len(self.events):
            self.seek(0)
        stride = max(1, len(self.events) // 200)  # a whole run plays in about 200 frames

        def advance() -> None:
            self.seek(self.position + stride)
            if self.position >= len(self.events) and self._player is not None:
                self._player.stop()
                self._player = None

        self._player = self.set_interval(self.watch_app.config.refresh_s, advance)
