"""The live run view: the watch stream in a worker, folded into a ``RunState``, drawn by a timer."""

from __future__ import annotations

import asyncio
import logging

import msgspec
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer

from leyline import (
    CheckpointRequest,
    CommandAction,
    DebugRequest,
    EscalateRequest,
    StacksRequest,
    StopRequest,
)
from leyline.frames import EventBatch
from tui.client import ApiError, Connection, WatchStream
from tui.messages import ApiFailed, CommandPolled, ConnectionChanged, EventsArrived, RunStatusPolled, WriteAccess
from tui.safe_text import plain
from tui.screens.base import DashboardScreen
from tui.screens.call_form import CallForm
from tui.screens.diagnostics import AlertsScreen, StacksScreen
from tui.screens.forms import ConfirmStop, EscalateForm
from tui.views import run_ended, staleness
from tui.widgets.dashboard import RunDashboard, StreamInfo

logger = logging.getLogger(__name__)
REASON = "esper-watch"
"""The ``reason`` of every command the console sends."""


class RunViewScreen(DashboardScreen):
    """One run, live: header, panels, event log; ``d``/``p`` escalate, ``c`` checkpoints and ``S`` stops
    (once confirmed) the run, ``t`` asks for every rank's stacks, through ``POST /escalate``; ``a`` lists
    the run's alerts."""

    BINDINGS = [
        Binding("d", "debug", "debug window"),
        Binding("D", "debug_form", "debug…", show=False),
        Binding("p", "profile", "profile…"),
        Binding("c", "checkpoint", "checkpoint"),
        Binding("S", "stop", "stop…"),
        Binding("n", "next_panel", "next panel"),
        Binding("t", "stacks", "stacks"),
        Binding("a", "alerts", "alerts"),
        Binding("x", "call", "call…"),
    ]

    COMMAND_ACTIONS = frozenset({"debug", "debug_form", "profile", "checkpoint", "stop", "stacks", "call"})
    """Actions that send the run a command: offered only while it can take one."""

    def __init__(self, run_id: str, status: str = "", then: str | None = None) -> None:
        super().__init__(run_id, name=f"run:{run_id}")
        self.state.status = status
        self.then = then  # an action to run once shown: ``d``/``p`` pressed in the run picker
        self.connection = Connection("connecting")
        self.reconnects = 0
        self.token_refused = False
        self._ended = run_ended(status)
        self.unknown_polls = 0  # status polls that found the run not (yet) on the server
        self.last_arrival: float | None = None
        self._inflight = 0
        self._drained = asyncio.Event()
        self._stacks_shown: set[str] = set()

    def compose(self) -> ComposeResult:
        yield RunDashboard(self.watch_app.config.limits.log_lines, id="dashboard")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = plain(self.run_id)
        self.stream_events()
        self.poll_status()
        self.check_token()
        self.set_interval(self.watch_app.config.refresh_s, self.render_tick)
        self.render_tick()
        if self.then is not None:
            self.call_later(self.run_action, self.then)

    # --- network: the watch stream, with backpressure -----------------------------------------

    @work(exclusive=True, group="watch")
    async def stream_events(self) -> None:
        stream = WatchStream(self.watch_app.require_client().config, self.run_id)
        limit = self.watch_app.config.max_inflight_events
        async for item in stream:
            if isinstance(item, EventBatch):
                if item.events:
                    self._inflight += len(item.events)
                    self.post_message(EventsArrived(item.events))
                # Not reading the socket while the screen is behind bounds our memory; the
                # server then drops a lagging watcher and we resume from the cursor.
                while self._inflight > limit:
                    self._drained.clear()
                    await self._drained.wait()
            else:
                self.post_message(ConnectionChanged(item, stream.reconnects))

    @work(exclusive=True, group="token")
    async def check_token(self) -> None:
        """Whether the server takes our token for commands, asked once: a wrong one is shown in the header at
        once, not found out at the first escalation."""
        allowed = await self.watch_app.require_client().may_write()
        if allowed is not None:
            self.post_message(WriteAccess(allowed))

    def on_write_access(self, message: WriteAccess) -> None:
        self.token_refused = not message.allowed
        if self.token_refused:
            self.notify("the server does not take this console's token: d, p, c and S will be refused; "
                        "pass --token (or NISSA_TOKEN)", title="token refused", severity="error", timeout=10)
        self.render_tick()

    @work(exclusive=True, group="status")
    async def poll_status(self) -> None:
        """The server's word on the run (live, lost, finished): a silent trainer cannot say it is lost.

        A run the server does not know yet is waited for quietly: the console may be opened on a run
        whose trainer is still starting (``make demo`` does). Past ``run_wait_s`` it says so, once.
        """
        client = self.watch_app.require_client()
        config = self.watch_app.config
        last_error: int | None = None
        known = False
        while True:
            try:
                run = await client.get_run(self.run_id)
            except ApiError as err:
                if err.status == 404 and not known:
                    self.unknown_polls += 1
                    self._say_still_unknown(config.run_wait_s)
                elif err.status != last_error:  # say it once, not every poll (an unreachable server too)
                    self.post_message(ApiFailed(f"run {self.run_id}", err))
                last_error = err.status
            else:
                known, last_error = True, None
                self.post_message(RunStatusPolled(run.status))
            await asyncio.sleep(config.runs_poll_s)

    def _say_still_unknown(self, wait_s: float) -> None:
        polls_before = wait_s / self.watch_app.config.runs_poll_s
        if polls_before <= self.unknown_polls < polls_before + 1:
            self.notify(f"run {self.run_id} is not on the server after {wait_s:g} s; still waiting for it "
                        "(is its trainer running, and is --run right?)", title="waiting", severity="warning",
                        timeout=10)

    def on_run_status_polled(self, message: RunStatusPolled) -> None:
        # A server older than the interrupted and failed statuses says "finished"; the run log knows better.
        keeps_detail = run_ended(message.status) and run_ended(self.state.status)
        if message.status != self.state.status and not keeps_detail:
            self.state.status = message.status
            self.state.dirty.add("header")

    def on_events_arrived(self, message: EventsArrived) -> None:
        self.state.apply_all(message.events)
        self.last_arrival = self.watch_app.clock()
        self._inflight -= len(message.events)
        if self._inflight <= self.watch_app.config.max_inflight_events:
            self._drained.set()

    def on_connection_changed(self, message: ConnectionChanged) -> None:
        previous, self.connection = self.connection, message.connection
        self.reconnects = message.reconnects
        if message.connection.state == "unauthorized":
            self.notify(f"the server refused the stream: {message.connection.detail}; pass --token",
                        title="not authorized", severity="error", timeout=10)
        elif message.connection.state == "reconnecting" and previous.state == "connected":
            self.notify(f"stream lost ({message.connection.detail}); reconnecting", severity="warning")

    # --- drawing --------------------------------------------------------------------------------

    def stream_info(self) -> StreamInfo:
        silence = None if self.last_arrival is None else self.watch_app.clock() - self.last_arrival
        conn = self.connection
        label = conn.state if conn.state != "reconnecting" else f"reconnecting (try {conn.attempt})"
        return StreamInfo(label, staleness(silence, self.state.status, self.watch_app.config.stale),
                          self.reconnects, self.artifact_url(), token_refused=self.token_refused)

    def render_tick(self) -> None:
        self.dashboard.show(self.state, self.stream_info())
        if run_ended(self.state.status) != self._ended:  # the footer stops (or starts) offering commands
            self._ended = not self._ended
            self.refresh_bindings()

    def action_next_panel(self) -> None:
        self.dashboard.next_panel()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A run that ended takes no command: d, p, c and S leave the footer (each would be a 409)."""
        return not (action in self.COMMAND_ACTIONS and run_ended(self.state.status))

    # --- escalation -----------------------------------------------------------------------------

    def action_debug(self) -> None:
        n = self.watch_app.config.debug_epochs  # of the run's epochs: steps where every step ends one
        self.escalate(DebugRequest(run_id=self.run_id, epochs=n), f"debug window of {n} {self.state.window_unit}")

    def action_debug_form(self) -> None:
        self._ask(CommandAction.DEBUG, self.watch_app.config.debug_epochs)

    def action_profile(self) -> None:
        self._ask(CommandAction.PROFILE, self.watch_app.config.profile_batches)

    def action_stacks(self) -> None:
        self.escalate(StacksRequest(run_id=self.run_id))

    def action_alerts(self) -> None:
        self.app.push_screen(AlertsScreen(list(self.state.alerts.alerts.values())))

    def action_checkpoint(self) -> None:
        self.escalate(CheckpointRequest(run_id=self.run_id))

    def action_stop(self) -> None:
        def answered(yes: bool | None) -> None:
            if yes:
                self.escalate(StopRequest(run_id=self.run_id))

        self.app.push_screen(ConfirmStop(self.run_id, esper=self.state.esper), answered)

    def action_call(self) -> None:
        loop = self.state.loop
        if not loop.declared:
            self.notify("this run declared no commands of its own", severity="warning")
            return
        self.app.push_screen(CallForm(self.run_id, loop.declared, loop.offered()), self._chosen)

    def _ask(self, action: CommandAction, default: int) -> None:
        form = EscalateForm(self.run_id, action, default, phases=self.state.phases, esper=self.state.esper)
        self.app.push_screen(form, self._chosen)

    def _chosen(self, request: EscalateRequest | None) -> None:
        if request is not None:
            self.escalate(request)

    @work(group="escalate")
    async def escalate(self, request: EscalateRequest, what: str | None = None) -> None:
        """POST the command (the contract's own struct), then follow it at ``GET /commands/{id}`` until it
        ends; ``what`` it is called in notifications (the request's own description by default)."""
        client = self.watch_app.require_client()
        request = msgspec.structs.replace(request, reason=REASON)
        what = what or request.describe()
        try:
            command_id = await client.escalate(request)
        except ApiError as err:
            self.post_message(ApiFailed(what, err))
            return
        self.state.command_issued(command_id, request.action)
        self.notify(f"{what} requested: {command_id} queued", title=request.action.value)
        poll_s = self.watch_app.config.command_poll_s
        while True:
            await asyncio.sleep(poll_s)
            try:
                record = await client.command(command_id)
            except ApiError as err:
                if err.status == 0:
                    continue  # the server is away; the stream reconnects and so do we
                self.post_message(ApiFailed(f"following {command_id}", err))
                return
            self.post_message(CommandPolled(record))
            if record.status.terminal:
                return

    def on_command_polled(self, message: CommandPolled) -> None:
        r = message.record
        self.state.command_polled(r.command_id, r.action, r.status, r.applied_step,
                                  dict(r.result) if r.result is not None else None, r.message)
        answered = r.result is not None or any(rank.result for rank in r.ranks)
        if r.action is CommandAction.STACKS and answered and r.command_id not in self._stacks_shown:
            self._stacks_shown.add(r.command_id)  # once: a rank that never answers leaves it "applied"
            self.app.push_screen(StacksScreen(r))

    def on_api_failed(self, message: ApiFailed) -> None:
        err = message.error
        title = f"HTTP {err.status}" if err.status else "server unreachable"
        self.notify(f"{message.what}: {err.reason}", title=title, severity="error", timeout=8)
