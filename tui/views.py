"""Immutable per-panel views built from a ``RunState``; a panel re-renders only when its view changes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from leyline import CommandStatus, RunStatus, TopOp
from leyline.esper import SeedStage, SlotSnapshot
from leyline.esper.panels import PPO_FIGURES, ppo_health
from tui.loop import fmt_value
from tui.state import RunState

Staleness = Literal["LIVE", "SLOW", "STALE", "LOST", "FINISHED", "REPLAY", "WAITING"]


@dataclass(frozen=True)
class StaleThresholds:
    """How long without an event before a live run shows SLOW, then STALE."""

    slow_s: float = 5.0
    """Seconds of silence before SLOW (heartbeats normally arrive well within this)."""
    stale_s: float = 15.0
    """Seconds of silence before STALE."""

    def __post_init__(self) -> None:
        if not 0 < self.slow_s < self.stale_s:
            raise ValueError("need 0 < slow_s < stale_s")


def run_ended(status: str) -> bool:
    """The server (or the run log) says the run is over; a status this console does not know is not."""
    try:
        return RunStatus(status).ended
    except ValueError:
        return False


def staleness(silence_s: float | None, status: str, thresholds: StaleThresholds) -> Staleness:
    """LIVE / SLOW / STALE from the seconds since the last event arrived; ended runs say FINISHED, and a
    run the server calls lost says LOST, however recent the last event this console read (never LIVE
    beside "status lost")."""
    if run_ended(status):
        return "FINISHED"
    if status == RunStatus.LOST.value:
        return "LOST"
    if silence_s is None:
        return "WAITING"
    if silence_s < thresholds.slow_s:
        return "LIVE"
    return "SLOW" if silence_s < thresholds.stale_s else "STALE"


@dataclass(frozen=True)
class HeaderView:
    run_id: str
    name: str = ""
    status: str = ""
    round: int = 0
    epoch: int = 0
    step: int = 0
    rate: float | None = None
    level: str = "—"
    level_until: int | None = None
    hub_queue: int | None = None
    hub_drops: int = 0
    hub_reconnects: int | None = None
    hub_connected: bool | None = None
    connection: str = "connecting"
    staleness: Staleness = "WAITING"
    events: int = 0
    gaps: int = 0
    watch_reconnects: int = 0
    growth: Growth | None = None
    token_refused: bool = False
    plain: bool = False
    """A plain loop's run (no Esper kinds): step, epoch if it has its own, steps/s and its headline metrics."""
    has_epochs: bool = False
    steps_per_s: float | None = None
    headline: tuple[tuple[str, str], ...] = ()
    """(name, last value) of the run's headline metrics, as the loop logged them."""


HEADLINE = 3
"""Metrics a plain run's header shows: those its summary names first, then the first it logged."""


def headline(state: RunState) -> tuple[tuple[str, str], ...]:
    metrics = state.loop.metrics
    names = [n for n in state.summary if n in metrics] + [n for n in metrics if n not in state.summary]
    return tuple((n, fmt_value(metrics[n][1])) for n in names[:HEADLINE])


@dataclass(frozen=True)
class Growth:
    """What the fossilized seeds added to the hosts, over the envs' latest epochs."""

    fossilized: int
    """Fossilized seeds across the envs."""
    params: int
    """Parameters they added, summed over the envs."""
    host_params: int
    """Parameters of the envs' hosts, summed."""

    @property
    def percent(self) -> float:
        return 100.0 * self.params / self.host_params


def growth(state: RunState) -> Growth | None:
    """None until an epoch reports its host's size (runs from before that field say nothing)."""
    envs = [v for v in state.envs.values() if v.host_params]
    if not envs:
        return None
    fossils = sum(s.stage is SeedStage.FOSSILIZED for v in envs for s in v.seeds)
    return Growth(fossils, sum(v.fossilized_params for v in envs), sum(v.host_params or 0 for v in envs))


def header_view(state: RunState, connection: str, stale: Staleness, watch_reconnects: int, *,
                token_refused: bool = False) -> HeaderView:
    hub = state.hub
    return HeaderView(
        run_id=state.run_id, name=state.name, status=state.status, round=state.round,
        epoch=state.epoch, step=state.step,
        rate=None if state.env_epochs_per_s is None else round(state.env_epochs_per_s, 1),
        level=state.level.value if state.level else "—", level_until=state.level_until,
        hub_queue=hub.queue_depth if hub else None, hub_drops=state.hub_drops,
        hub_reconnects=hub.reconnects if hub else None, hub_connected=hub.connected if hub else None,
        connection=connection, staleness=stale, events=state.events_total, gaps=state.gaps,
        watch_reconnects=watch_reconnects, growth=growth(state), token_refused=token_refused,
        plain=not state.esper, has_epochs=state.has_epochs,
        steps_per_s=None if state.steps_per_s is None else round(state.steps_per_s, 1), headline=headline(state),
    )


@dataclass(frozen=True)
class EnvRow:
    env: int
    epoch: int
    accuracy: tuple[float, ...]
    val_loss: float | None
    reward: float | None
    action: str | None
    seeds: tuple[SlotSnapshot, ...]


def env_rows(state: RunState) -> tuple[EnvRow, ...]:
    return tuple(
        EnvRow(env, v.epoch, tuple(v.accuracy), v.val_loss, v.reward, v.action, v.seeds)
        for env, v in sorted(state.envs.items())
    )


@dataclass(frozen=True)
class Series:
    """One named metric: its history (None = not measured) for a sparkline, latest value first."""

    name: str
    values: tuple[float | None, ...]
    flag: str = ""

    @property
    def latest(self) -> float | None:
        return self.values[-1] if self.values else None


@dataclass(frozen=True)
class PPOView:
    round: int
    series: tuple[Series, ...]
    heads: tuple[tuple[str, float], ...]
    early_stopped: bool


def ppo_view(state: RunState) -> PPOView:
    ups = list(state.ppo)
    series = tuple(Series(name, tuple(get(u) for u in ups)) for name, get in PPO_FIGURES)  # the page's figures too
    last = ups[-1] if ups else None
    health = ppo_health(last) if last else None
    return PPOView(last.round if last else 0, series, tuple(health.heads) if health else (),
                   bool(last and last.early_stopped))


@dataclass(frozen=True)
class HealthView:
    grads: tuple[Series, ...]
    lstm: tuple[Series, ...]


def _grad_flag(nonfinite: int, vanishing: bool, exploding: bool) -> str:
    return "NONFINITE" if nonfinite else "EXPLODING" if exploding else "VANISHING" if vanishing else ""


def health_view(state: RunState) -> HealthView:
    grads = []
    for scope, hist in sorted(state.grad.items()):
        last = hist[-1]
        grads.append(Series(scope, tuple(g.global_norm for g in hist),
                            _grad_flag(last.nonfinite, last.vanishing, last.exploding)))
    lstm: tuple[Series, ...] = ()
    if state.lstm:
        newest = state.lstm[-1]
        flag = _grad_flag(int(newest.nonfinite), newest.vanishing, newest.exploding)
        lstm = (Series("lstm h", tuple(x.h_norm for x in state.lstm), flag),
                Series("lstm c", tuple(x.c_norm for x in state.lstm), flag))
    return HealthView(tuple(grads), lstm)


@dataclass(frozen=True)
class TimelineRow:
    epoch: int
    env: int | None
    slot: str
    seed_id: str
    what: str


def timeline_rows(state: RunState, limit: int) -> tuple[TimelineRow, ...]:
    tail = list(state.timeline)[-limit:]
    return tuple(TimelineRow(t.epoch, t.env, t.slot, t.seed_id, t.what) for t in reversed(tail))


@dataclass(frozen=True)
class AnomalyRow:
    epoch: int
    env: int | None
    anomaly: str
    detail: str
    auto: bool


def anomaly_rows(state: RunState) -> tuple[AnomalyRow, ...]:
    return tuple(AnomalyRow(a.epoch, a.env, a.payload.anomaly, a.payload.detail, a.payload.auto_escalated)
                 for a in reversed(state.anomalies))


@dataclass(frozen=True)
class CommandRow:
    command_id: str
    action: str
    status: CommandStatus
    path: tuple[tuple[str, int | None], ...]
    result: str
    message: str


def command_rows(state: RunState) -> tuple[CommandRow, ...]:
    rows = []
    for c in reversed(state.commands.values()):
        result = ", ".join(f"{k}={v}" for k, v in (c.result or {}).items())
        rows.append(CommandRow(c.command_id, c.action.value, c.status,
                               tuple((s.value, step) for s, step in c.history), result, c.message))
    return tuple(rows)


@dataclass(frozen=True)
class ProfileView:
    state: Literal["none", "running", "completed"]
    window: str = ""
    batches: int = 0
    wall_s: float | None = None
    trace_path: str = ""
    artifact_url: str | None = None
    top_ops: tuple[TopOp, ...] = ()
    target: str = "batches"
    ranks: tuple[tuple[int, float, str], ...] = ()
    """In a run of several ranks: (rank, wall seconds, trace file) of each rank's trace of the window."""

    @property
    def span(self) -> str:
        """What the window records: ``N batches`` or ``the PPO update``."""
        return "the PPO update" if self.target == "update" else f"{self.batches} batches"


def profile_view(state: RunState, artifact_url: str | None) -> ProfileView:
    if state.profile_running is not None:
        p = state.profile_running
        return ProfileView("running", p.window, p.batches, trace_path=p.trace_dir, target=p.target)
    if state.profile is not None:
        c = state.profile
        per_rank = state.ranks.windows.get(c.window, {}) if state.ranks.several else {}
        ranks = tuple((r, p.wall_s, p.trace_path.rsplit("/", 1)[-1]) for r, p in sorted(per_rank.items()))
        return ProfileView("completed", c.window, c.batches, c.wall_s, c.trace_path, artifact_url,
                           tuple(c.top_ops), c.target, ranks)
    return ProfileView("none")
