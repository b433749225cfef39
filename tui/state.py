"""What the console knows about one run, folded from its events; every buffer is bounded.

``RunState.apply`` is pure bookkeeping (no Textual): the screens apply whole batches and render
at a bounded rate from whatever panels the batch marked dirty.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable
from typing import TypeVar, cast

from leyline import (
    SERVER_RANK,
    AlertChanged,
    AnomalyDetected,
    CommandAction,
    CommandStatus,
    CommandStatusChanged,
    Event,
    EventsDropped,
    GradientHealth,
    HubHealth,
    Metrics,
    Payload,
    PhaseTiming,
    ProfileCompleted,
    ProfileStarted,
    RunFinished,
    RunResumed,
    RunStarted,
    RunStatus,
    SystemMetrics,
    TelemetryLevel,
    TelemetryLevelChanged,
)
from leyline.esper import (
    EpochCompleted,
    LSTMHealth,
    PPOUpdate,
    SeedFossilized,
    SeedGateEvaluated,
    SeedGerminated,
    SeedPruned,
    SeedStageChanged,
)
from leyline.esper.panels import PANELS as ESPER_PANELS
from leyline.esper.panels import env_cell, seed_what, starting_level
from leyline.panels import client_panels
from tui.alerts import AlertTracker
from tui.format import LogLine
from tui.loop import LoopView
from tui.ranks import RankTracker
from tui.state_rows import AnomalyView, CommandView, EnvView, Limits, TimelineEntry


class RunState:
    """The folded state of one run plus bookkeeping of what the last batch changed."""

    def __init__(self, run_id: str, limits: Limits | None = None) -> None:
        self.run_id = run_id
        self.limits = limits or Limits()
        lim = self.limits
        self.name = ""
        self.status = ""
        self.config: dict[str, object] = {}
        self.epoch = 0
        self.round = 0
        self.step = 0
        self.last_ts: float | None = None
        self.level: TelemetryLevel | None = None
        self.level_until: int | None = None
        self.env_epochs_per_s: float | None = None
        self._epoch_ts: deque[float] = deque(maxlen=64)
        self.steps_per_s: float | None = None
        """A loop's steps a second, over its latest steps (any run: the step of its events)."""
        self._step_ts: deque[tuple[float, int]] = deque(maxlen=64)
        self.summary: list[str] = []
        """The metrics the run named in ``run_started.summary``: its headline metrics first."""
        self.phases: list[str] | None = None
        """The phases a profile window of target ``update`` can record (``run_started.phases``); None: unsaid."""
        self.hub: HubHealth | None = None
        self.dropped_reported = 0
        self.envs: dict[int, EnvView] = {}
        self.timeline: deque[TimelineEntry] = deque(maxlen=lim.timeline)
        self.ppo: deque[PPOUpdate] = deque(maxlen=lim.history)
        self.grad: dict[str, deque[GradientHealth]] = {}
        self.lstm: deque[LSTMHealth] = deque(maxlen=lim.history)
        self.anomalies: deque[AnomalyView] = deque(maxlen=lim.anomalies)
        self.commands: OrderedDict[str, CommandView] = OrderedDict()
        self.profile_running: ProfileStarted | None = None
        self.profile: ProfileCompleted | None = None
        self.log: deque[LogLine] = deque(maxlen=lim.log_lines)
        self.logged_total = 0
        self.metric_steps = 0
        self.events_total = 0
        self.kinds: set[str] = set()
        """The kinds (by name) the run has events of: which client's panels it has (``panels``)."""
        self.last_seq: dict[int, int] = {}
        self.gaps = 0
        self.duplicates = 0
        self.ranks = RankTracker()
        """Each rank of a run of several (torchrun)."""
        self.alerts = AlertTracker()
        """The server's alerts on the run."""
        self.loop = LoopView()
        """Its metrics and declared commands (any loop's run)."""
        self.dirty: set[str] = set()

    # --- folding ---------------------------------------------------------------------------

    def apply_all(self, events: list[Event]) -> None:
        for event in events:
            self.apply(event)

    def apply(self, event: Event) -> None:
        """Fold one event in; a duplicate (same rank and seq seen already) is counted and skipped."""
        last = self.last_seq.get(event.rank, 0)
        if event.seq <= last:
            self.duplicates += 1
            return
        if event.seq > last + 1:
            self.gaps += event.seq - last - 1
        self.last_seq[event.rank] = event.seq
        self.events_total += 1
        self.kinds.add(event.kind.value)
        if event.rank >= 0:
            if event.step > self.step:
                self._step_at(event.ts, event.step)
            self.step = max(self.step, event.step)
            self.epoch = max(self.epoch, event.epoch)
            self.last_ts = event.ts
        if isinstance(event.payload, Metrics | SystemMetrics):  # a loop's metric steps: a count, not a line each
            self.metric_steps += 1
        else:
            self.log.append(LogLine.of(event))
            self.logged_total += 1
        self.dirty.update(("log", "header"))
        self.dirty |= self.ranks.apply(event)
        handler = _HANDLERS.get(type(event.payload))
        if handler is not None:
            handler(self, event, event.payload)

    def _step_at(self, ts: float, step: int) -> None:
        self._step_ts.append((ts, step))
        (t0, s0), (t1, s1) = self._step_ts[0], self._step_ts[-1]
        if t1 > t0:
            self.steps_per_s = (s1 - s0) / (t1 - t0)

    def take_dirty(self) -> set[str]:
        dirty, self.dirty = self.dirty, set()
        return dirty

    # --- commands issued by this console -----------------------------------------------------

    def command_issued(self, command_id: str, action: CommandAction) -> CommandView:
        view = self.commands.get(command_id)
        if view is None:
            view = CommandView(command_id, action, CommandStatus.QUEUED, [(CommandStatus.QUEUED, None)])
            self._add_command(view)
        self.dirty.add("commands")
        return view

    def command_polled(self, command_id: str, action: CommandAction, status: CommandStatus,
                       applied_step: int | None, result: dict[str, object] | None, message: str) -> None:
        view = self.commands.get(command_id) or self.command_issued(command_id, action)
        view.advance(status, applied_step, message)
        view.applied_step = applied_step if applied_step is not None else view.applied_step
        view.result = result if result is not None else view.result
        self.dirty.add("commands")

    def _add_command(self, view: CommandView) -> None:
        self.commands[view.command_id] = view
        while len(self.commands) > self.limits.commands:
            victim = next((k for k, v in self.commands.items() if v.status.terminal), None)
            self.commands.pop(victim if victim is not None else next(iter(self.commands)))

    # --- derived -----------------------------------------------------------------------------

    @property
    def hub_drops(self) -> int:
        reported = sum(self.hub.dropped.values()) if self.hub else 0
        return max(reported, self.dropped_reported)

    @property
    def panels(self) -> list[str]:
        """The client's own panels the run has, by the rule the server serves with it (``RunDetail.panels``)."""
        return client_panels(self.kinds)

    @property
    def esper(self) -> bool:
        """The run has Esper's panels (envs, seeds, PPO): a plain loop's run shows its metrics instead."""
        return ESPER_PANELS in self.panels

    @property
    def has_epochs(self) -> bool:
        """The run counts epochs of its own (Esper's, or a loop's ``steps_per_epoch``, ``run.epoch_end()``); a loop
        whose every step ends an epoch (``nissa.init``'s default) has none: it is spoken of in steps, its debug
        window's length too (an epoch is then a step: its number is the step's, or the step's before it in runs
        stored while steps were counted from 1; the header used to show it as an epoch of the loop's)."""
        return self.esper or 0 < self.epoch < self.step - 1

    @property
    def window_unit(self) -> str:
        """What a debug window's length counts on this run: ``epochs``, or ``steps`` where it has no epochs."""
        return "epochs" if self.has_epochs else "steps"

def _on_run_started(state: RunState, event: Event, p: RunStarted) -> None:
    state.name, state.config, state.status = p.name, dict(p.config), state.status or "live"
    if event.rank == 0:
        state.loop.declared = list(p.commands)
        state.summary = list(p.summary)
        state.phases = None if p.phases is None else list(p.phases)
    if state.level is None:
        state.level = starting_level(p.config)  # until a change says otherwise
    state.dirty.add("header")


def _on_run_finished(state: RunState, event: Event, p: RunFinished) -> None:
    state.status = RunStatus.after_finish(p.status).value
    state.dirty.add("header")


def _on_run_resumed(state: RunState, event: Event, p: RunResumed) -> None:
    state.status = RunStatus.LIVE.value  # whatever it ended as: it goes on
    state.dirty.add("header")


def _on_epoch(state: RunState, event: Event, p: EpochCompleted) -> None:
    state.round = max(state.round, p.round)
    cell = env_cell(event)  # what the page's env grid shows of it too
    if cell is None:
        return
    view = state.envs.get(cell.env)
    if view is None:
        if len(state.envs) >= state.limits.envs:
            return
        view = state.envs[cell.env] = EnvView(accuracy=deque(maxlen=state.limits.history))
    view.accuracy.append(cell.accuracy)
    view.val_loss, view.reward, view.action = cell.val_loss, cell.reward, cell.action
    view.epoch, view.seeds = cell.epoch, tuple(cell.seeds)
    view.host_params, view.fossilized_params = p.host_params, p.fossilized_params
    state._epoch_ts.append(event.ts)
    span = state._epoch_ts[-1] - state._epoch_ts[0]
    if span > 0 and len(state._epoch_ts) > 1:
        state.env_epochs_per_s = (len(state._epoch_ts) - 1) / span
    state.dirty.add("envs")


_SeedPayload = SeedGerminated | SeedStageChanged | SeedGateEvaluated | SeedFossilized | SeedPruned


def _on_seed(state: RunState, event: Event, p: _SeedPayload) -> None:
    state.timeline.append(TimelineEntry(event.epoch, event.env, p.slot, p.seed_id, seed_what(p)))
    state.dirty.add("timeline")


def _on_ppo(state: RunState, event: Event, p: PPOUpdate) -> None:
    state.ppo.append(p)
    state.dirty.add("ppo")


def _on_grad(state: RunState, event: Event, p: GradientHealth) -> None:
    series = state.grad.get(p.scope)
    if series is None:
        if len(state.grad) >= 16:  # scopes are few (host, slots, policy); refuse a runaway set
            return
        series = state.grad[p.scope] = deque(maxlen=state.limits.history)
    series.append(p)
    state.dirty.add("health")


def _on_lstm(state: RunState, event: Event, p: LSTMHealth) -> None:
    state.lstm.append(p)
    state.dirty.add("health")


def _on_anomaly(state: RunState, event: Event, p: AnomalyDetected) -> None:
    state.anomalies.append(AnomalyView(event.epoch, event.env, p))
    state.dirty.add("anomalies")


def _on_level(state: RunState, event: Event, p: TelemetryLevelChanged) -> None:
    state.level, state.level_until = p.level, p.until_epoch
    state.dirty.add("header")


def _on_phase(state: RunState, event: Event, p: PhaseTiming) -> None:
    if p.env_epochs_per_s is not None:
        state.env_epochs_per_s = p.env_epochs_per_s
        state._epoch_ts.clear()  # the trainer's own figure wins over our estimate


def _on_command(state: RunState, event: Event, p: CommandStatusChanged) -> None:
    state.command_polled(p.command_id, p.action, p.status, p.applied_step,
                         dict(p.result) if p.result is not None else None, p.message)


def _on_profile_started(state: RunState, event: Event, p: ProfileStarted) -> None:
    state.profile_running = p
    state.dirty.add("profile")


def _on_profile_completed(state: RunState, event: Event, p: ProfileCompleted) -> None:
    state.profile_running = None
    if p.top_ops or state.profile is None or not state.profile.top_ops:
        state.profile = p  # a window that recorded no operator does not hide the last one that did
    state.dirty.add("profile")


def _on_hub(state: RunState, event: Event, p: HubHealth) -> None:
    state.hub = p


def _on_dropped(state: RunState, event: Event, p: EventsDropped) -> None:
    state.dropped_reported += p.total


def _on_alert(state: RunState, event: Event, p: AlertChanged) -> None:
    if event.rank != SERVER_RANK:  # only the server raises alerts: a trainer's would be a forged banner
        return
    state.alerts.apply(event)
    state.dirty.update(("alerts", "ranks"))


def _on_metrics(state: RunState, event: Event, p: Metrics) -> None:
    state.loop.fold(event.step, p)
    state.dirty.add("metrics")


_P = TypeVar("_P", bound=Payload)
_Handler = Callable[[RunState, Event, Payload], None]


def _row(kind: type[_P], handler: Callable[[RunState, Event, _P], None]) -> tuple[type[Payload], _Handler]:
    """One row of the table below, ``handler`` checked against ``kind``: ``apply`` calls it only with a ``kind``."""
    return kind, cast(_Handler, handler)


_HANDLERS: dict[type[Payload], _Handler] = dict([
    _row(AlertChanged, _on_alert),
    _row(RunStarted, _on_run_started),
    _row(RunFinished, _on_run_finished),
    _row(RunResumed, _on_run_resumed),
    _row(EpochCompleted, _on_epoch),
    _row(SeedGerminated, _on_seed),
    _row(SeedStageChanged, _on_seed),
    _row(SeedGateEvaluated, _on_seed),
    _row(SeedFossilized, _on_seed),
    _row(SeedPruned, _on_seed),
    _row(PPOUpdate, _on_ppo),
    _row(GradientHealth, _on_grad),
    _row(LSTMHealth, _on_lstm),
    _row(AnomalyDetected, _on_anomaly),
    _row(TelemetryLevelChanged, _on_level),
    _row(PhaseTiming, _on_phase),
    _row(CommandStatusChanged, _on_command),
    _row(ProfileStarted, _on_profile_started),
    _row(ProfileCompleted, _on_profile_completed),
    _row(HubHealth, _on_hub),
    _row(EventsDropped, _on_dropped),
    _row(Metrics, _on_metrics),
])
