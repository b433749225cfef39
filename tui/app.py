"""The esper-watch application and its factory, shared by the CLI and the tests."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from textual.app import App
from textual.binding import Binding
from textual.notifications import SeverityLevel

from leyline import DecodeError, Event, decode_event
from tui.client import NissaClient
from tui.config import WatchConfig
from tui.safe_text import plain
from tui.screens.charts import ChartScreen
from tui.screens.forms import HelpScreen
from tui.screens.replay import ReplayScreen
from tui.screens.run_picker import RunPickerScreen
from tui.screens.run_view import RunViewScreen

logger = logging.getLogger(__name__)


class EsperWatch(App[None]):
    """The operator console: pick a run, watch it live, escalate, replay it once finished."""

    TITLE = "esper-watch"
    BINDINGS = [
        Binding("q", "quit", "quit"),
        Binding("question_mark", "help", "help"),
        Binding("r", "run_picker", "runs"),
    ]

    def __init__(self, config: WatchConfig, replay_events: list[Event] | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.config = config
        self.clock = clock
        """Seconds on a monotonic clock: how long a run has been silent (LIVE, SLOW, STALE) is read on it."""
        self.client: NissaClient | None = None
        self._replay_events = replay_events

    def require_client(self) -> NissaClient:
        if self.client is None:
            raise RuntimeError("this console was started without --server")
        return self.client

    async def on_mount(self) -> None:
        if self.config.client is not None:
            self.client = NissaClient(self.config.client)
        if self._replay_events is not None:
            run_id = self._replay_events[0].run_id if self._replay_events else "empty"
            await self.push_screen(ReplayScreen(run_id, self._replay_events))
            if self.config.charts:
                await self.push_screen(ChartScreen([run_id], {run_id: self._replay_events}))
        elif self.config.compare or (self.config.run_id and self.config.charts):
            await self.push_screen(RunPickerScreen())
            await self.push_screen(ChartScreen(list(self.config.compare) or [str(self.config.run_id)]))
        elif self.config.run_id:
            await self.push_screen(RunViewScreen(self.config.run_id))
        else:
            await self.push_screen(RunPickerScreen())

    async def on_unmount(self) -> None:
        if self.client is not None:
            await self.client.aclose()

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """Every toast of the console, as text: its messages carry run names and the server's reasons, so
        markup is never read in them (``markup`` is ignored) and control characters are shown."""
        super().notify(plain(message, one_line=False), title=plain(title), severity=severity, timeout=timeout,
                       markup=False)

    def open_run(self, run_id: str, status: str, replay: bool, then: str | None = None) -> None:
        self.push_screen(ReplayScreen(run_id) if replay else RunViewScreen(run_id, status, then))

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_run_picker(self) -> None:
        if self.client is None:
            self.notify("no server to list runs from (started with --replay)", severity="warning")
            return
        for screen in reversed(self.screen_stack):
            if isinstance(screen, RunPickerScreen):
                while self.screen is not screen:
                    self.pop_screen()
                return
        self.switch_screen(RunPickerScreen())


def read_run_log(path: Path, max_events: int) -> list[Event]:
    """A local run log (one JSON envelope a line); a torn last line from a crash is skipped."""
    out: list[Event] = []
    with path.open("rb") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                out.append(decode_event(line))
            except DecodeError as err:
                logger.warning("%s:%d: skipped: %s", path, number, err)
            if len(out) >= max_events:
                break
    return out


def build_app(config: WatchConfig) -> EsperWatch:
    """The app as the CLI runs it; a replay file is read here, before the terminal is taken (ValueError:
    it holds no event, OSError: it cannot be read)."""
    events = read_run_log(config.replay_file, config.max_replay_events) if config.replay_file else None
    if events == []:
        raise ValueError("no event could be read from it (is it a run log, <log-dir>/<run_id>/events.jsonl?)")
    return EsperWatch(config, events)
