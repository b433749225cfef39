"""What an Esper run's panels show, defined once for the console and the web page: the env grid (each env's
accuracy and its slots' seeds and stages), the seed lifecycle log (each decision in words, with its contribution),
PPO health (the figures of the latest update) and the telemetry level and windows in force. The console folds its
events into these as they come; the server folds a run's latest stored events the same way for the page
(``GET /runs/{run_id}/esper``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import get_args

import msgspec

from leyline.enums import Kind, TelemetryLevel
from leyline.esper.enums import EsperKind
from leyline.esper.policy import HEAD_NAMES, PPOUpdate
from leyline.esper.seeds import (
    EpochCompleted,
    SeedFossilized,
    SeedGateEvaluated,
    SeedGerminated,
    SeedPruned,
    SeedStageChanged,
    SlotSnapshot,
)
from leyline.events import Event
from leyline.payloads_ops import ProfileCompleted, ProfileStarted, TelemetryLevelChanged

PANELS = "esper"
"""The panels' name: a run's page shows them where its data lists it (``RunDetail.panels``, by
``leyline.panels.client_panels``), and reads them at ``GET /runs/{run_id}/esper``."""
PANEL_KINDS: frozenset[Kind] = frozenset(EsperKind)
"""The kinds that make a run Esper's, its page one with these panels: any of Esper's own (a plain loop speaks none)."""

SeedPayload = SeedGerminated | SeedStageChanged | SeedGateEvaluated | SeedFossilized | SeedPruned
SEED_KINDS: tuple[Kind, ...] = tuple(tp.KIND for tp in get_args(SeedPayload))
"""The seed log's kinds (a store reads the newest ``SEED_LOG_ROWS`` of each)."""
TAIL_KINDS: frozenset[Kind] = frozenset({EpochCompleted.KIND, PPOUpdate.KIND})
"""The kinds the env grid and PPO health read from a run's latest events (the latest epoch of each env, the
latest update)."""
SEED_LOG_ROWS = 50
"""Seed decisions the page's log shows, newest first."""
MAX_ENVS = 64
"""Envs a grid shows (the console's bound too)."""


def _payoff(p: SeedFossilized) -> str:
    """What the seed brought (its contribution, in accuracy points) for what it costs (its parameters, as a share
    of the host's where the host's size is known)."""
    gain = "— pp" if p.contribution is None else f"{p.contribution * 100:+.1f} pp"
    cost = f"+{100 * p.params / p.host_params:.1f}% params" if p.host_params else f"+{p.params:,} params"
    return f"{gain}, {cost}"


def seed_what(p: SeedPayload) -> str:
    """A seed decision in words, after its slot and seed id (the log's columns say those)."""
    if isinstance(p, SeedGerminated):
        return f"germinated {p.blueprint} ({p.params} params)"
    if isinstance(p, SeedStageChanged):
        return f"{p.from_stage.value} → {p.to_stage.value}" + (f" ({p.reason})" if p.reason else "")
    if isinstance(p, SeedGateEvaluated):
        return f"gate {p.gate} {'passed' if p.passed else 'FAILED'} {p.reason}".rstrip()
    if isinstance(p, SeedFossilized):
        return f"fossilized {p.blueprint} {_payoff(p)}"
    return f"pruned {p.blueprint}: {p.reason}" + ("" if p.contribution is None else f", {p.contribution * 100:+.1f} pp")


class SeedLogRow(msgspec.Struct, kw_only=True, frozen=True):
    """One seed decision: where, which seed, what, and what the seed contributed (accuracy points as a fraction)."""

    epoch: int
    env: int | None
    slot: str
    seed_id: str
    what: str
    contribution: float | None = None


def seed_row(event: Event) -> SeedLogRow | None:
    p = event.payload
    if not isinstance(p, SeedPayload):
        return None
    contribution = p.contribution if isinstance(p, SeedFossilized | SeedPruned) else None
    return SeedLogRow(epoch=event.epoch, env=event.env, slot=p.slot, seed_id=p.seed_id, what=seed_what(p),
                      contribution=contribution)


class EnvCell(msgspec.Struct, kw_only=True, frozen=True):
    """One env at its latest epoch: accuracy, losses, the policy's action and each slot's seed and stage."""

    env: int
    epoch: int
    accuracy: float
    val_loss: float | None
    reward: float | None
    action: str | None
    seeds: list[SlotSnapshot]


def env_cell(event: Event) -> EnvCell | None:
    p = event.payload
    if not isinstance(p, EpochCompleted):
        return None
    return EnvCell(env=event.env if event.env is not None else 0, epoch=event.epoch, accuracy=p.accuracy,
                   val_loss=p.val_loss, reward=p.reward, action=p.action, seeds=list(p.seeds))


def _mean(values: Iterable[float]) -> float | None:
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else None


PPO_FIGURES: tuple[tuple[str, Callable[[PPOUpdate], float | None]], ...] = (
    ("policy loss", lambda u: u.policy_loss),
    ("value loss", lambda u: u.value_loss),
    ("approx KL", lambda u: u.approx_kl),
    ("clip frac", lambda u: u.clip_fraction),
    ("expl. var", lambda u: u.explained_variance),
    ("grad norm", lambda u: u.grad_norm),
    ("entropy", lambda u: _mean(u.entropy.values())),
)
"""PPO health's figures, by name, from one update."""


class PPOHealth(msgspec.Struct, kw_only=True, frozen=True):
    """The latest PPO update's figures (``PPO_FIGURES``), each head's entropy, and whether it stopped early."""

    round: int
    figures: list[tuple[str, float | None]]
    heads: list[tuple[str, float]]
    early_stopped: bool


def ppo_health(update: PPOUpdate) -> PPOHealth:
    order = {h: i for i, h in enumerate(HEAD_NAMES)}
    return PPOHealth(round=update.round, figures=[(name, get(update)) for name, get in PPO_FIGURES],
                     heads=sorted(update.entropy.items(), key=lambda kv: order.get(kv[0], 99)),
                     early_stopped=update.early_stopped)


class EsperPanels(msgspec.Struct, kw_only=True):
    """An Esper run's panels, as its page draws them."""

    envs: list[EnvCell] = []
    seed_log: list[SeedLogRow] = []
    """Newest first."""
    ppo: PPOHealth | None = None
    level: str | None = None
    """The telemetry level in force (None: the run never said)."""
    level_until: int | None = None
    """The epoch a temporary level (a debug window) ends at."""
    profiling: str | None = None
    """The profile window open now, in words."""


def starting_level(config: Mapping[str, object]) -> TelemetryLevel | None:
    """The telemetry level a run started at, as its ``run_started`` config says it (None: it did not say)."""
    level = config.get("telemetry_level")
    if isinstance(level, str) and level.upper() in TelemetryLevel.__members__:
        return TelemetryLevel[level.upper()]
    return None


def fold(events: Iterable[Event], level: str | None = None) -> EsperPanels:
    """The panels from a run's events in the order they happened (the latest of each env, update and level win;
    ``level``: the run's starting level)."""
    envs: dict[int, EnvCell] = {}
    seeds: list[SeedLogRow] = []
    panels = EsperPanels(level=level)
    for event in events:
        p = event.payload
        row, cell = seed_row(event), env_cell(event)
        if row is not None:
            seeds.append(row)
        elif cell is not None:
            envs[cell.env] = cell
        elif isinstance(p, PPOUpdate):
            panels.ppo = ppo_health(p)
        elif isinstance(p, TelemetryLevelChanged):
            panels.level, panels.level_until = p.level.value, p.until_epoch
        elif isinstance(p, ProfileStarted):
            panels.profiling = f"window {p.window}: " + ("the next update" if p.target == "update"
                                                         else f"{p.batches} batches")
        elif isinstance(p, ProfileCompleted):
            panels.profiling = None
    panels.envs = [envs[k] for k in sorted(envs)][:MAX_ENVS]
    panels.seed_log = seeds[::-1][:SEED_LOG_ROWS]
    return panels
