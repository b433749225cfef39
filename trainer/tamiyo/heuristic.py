"""Heuristic Tamiyo: a policy that responds to the run it watches.

- It germinates when the host's validation accuracy has plateaued (the last epochs did not beat the
  best before them by ``plateau_delta``), or at the last epoch that still leaves a seed the time it
  needs to train, blend in and be judged; never later (a seed that cannot be judged only costs).
- It fossilizes a holding seed whose contribution clears the noise of its measurement: the paired
  accuracy difference on ``validation_images`` images has a standard error of at least
  ``sqrt(|c| / n)``, and the contribution must be ``z`` of those above 0, twice running.
- It prunes a seed whose contribution is that far below 0 twice running, and a holding seed that has
  not cleared its noise within ``hold_epochs`` (no measurable help is not worth its parameters).
- It picks each blueprint by what earlier seeds of it brought in that slot (the contribution at
  fossilization or pruning, less a rent per % of parameters), trying each blueprint once first and
  then the best by an upper confidence bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from leyline.esper import SeedStage
from trainer.kasmina.lifecycle import LifecycleConfig
from trainer.kasmina.slot import SeedSlot
from trainer.tamiyo.actions import TEMPOS, Action, Op
from trainer.tamiyo.features import EnvSignals


@dataclass(frozen=True)
class HeuristicConfig:
    """When the heuristic acts."""

    plateau_delta: float = 0.01
    """The last ``plateau_epochs`` must beat the best accuracy before them by this much, or the host
    has plateaued."""
    plateau_epochs: int = 2
    """Epochs the plateau test looks back over."""
    validation_images: int = 256
    """Images behind each contribution measurement (its noise shrinks with them)."""
    z: float = 2.0
    """Standard errors a contribution must clear to count as help (or harm)."""
    hold_epochs: int = 2
    """Epochs a holding seed gets to clear its noise before it is pruned."""
    rent_per_pct: float = 0.0005
    """Accuracy a blueprint must bring per 1% of the host's parameters it adds, when choosing one."""
    explore: float = 0.02
    """Weight of the exploration bonus ``explore · sqrt(ln N / n)`` when choosing a blueprint."""
    blueprints: tuple[str, ...] = ("conv_light", "attention", "depthwise", "conv_heavy", "bottleneck",
                                   "conv_small")
    """Blueprints it may choose, the untried ones in this order."""
    tempo: int = TEMPOS[0]
    """Epochs a seed takes to blend in."""

    def __post_init__(self) -> None:
        if self.plateau_epochs < 1 or self.validation_images < 1 or self.hold_epochs < 1 or not self.blueprints:
            raise ValueError("plateau_epochs, validation_images and hold_epochs must be >= 1, "
                             "and at least one blueprint given")
        if self.z < 0 or self.explore < 0 or self.tempo not in TEMPOS:
            raise ValueError(f"z and explore must be >= 0 and tempo one of {TEMPOS}")


@dataclass
class BlueprintRecord:
    """What the seeds of one blueprint in one slot brought when they were judged."""

    outcomes: list[float] = field(default_factory=list)
    """Contribution less the parameter rent, per judged seed."""

    @property
    def mean(self) -> float:
        return sum(self.outcomes) / len(self.outcomes)


class HeuristicPolicy:
    """Rule-based lifecycle decisions, one env at a time (cheap: no tensors, no device work)."""

    def __init__(self, config: HeuristicConfig, lifecycle: LifecycleConfig) -> None:
        self.config, self.lifecycle = config, lifecycle
        self.records: dict[tuple[int, str], BlueprintRecord] = {}

    def act(self, envs: Sequence[EnvSignals], op_mask: torch.Tensor, slot_mask: torch.Tensor) -> torch.Tensor:
        """[n_envs, n_heads] head indices, always legal under the masks."""
        return torch.tensor([self._decide(env, slot_mask[e].tolist()) for e, env in enumerate(envs)],
                            dtype=torch.long)

    def state_dict(self) -> dict[str, object]:
        return {"records": [[slot, bp, list(r.outcomes)] for (slot, bp), r in self.records.items()]}

    def load_state_dict(self, state: dict) -> None:
        self.records = {(int(slot), str(bp)): BlueprintRecord([float(v) for v in outcomes])
                        for slot, bp, outcomes in state.get("records", [])}

    # --- one env --------------------------------------------------------------------------------

    def _decide(self, env: EnvSignals, allowed: list[list[bool]]) -> list[int]:
        slots = list(env.slots)
        for i, slot in enumerate(slots):
            if allowed[Op.FOSSILIZE][i] and self.helps(slot):
                self._judge(i, slot, env)
                return Action.row(Op.FOSSILIZE, i)
        for i, slot in enumerate(slots):
            if allowed[Op.PRUNE][i] and (self.hurts(slot) or self._unproven(slot)):
                self._judge(i, slot, env)
                return Action.row(Op.PRUNE, i)
        for i, slot in enumerate(slots):
            if allowed[Op.ADVANCE][i] and self._ready(slot):
                return Action.row(Op.ADVANCE, i)
        free = [i for i, ok in enumerate(allowed[Op.GERMINATE]) if ok]
        if free and self._time_left(env) and (self.plateaued(env) or self._last_chance(env)):
            at, blueprint = self.choose(free)
            return Action.row(Op.GERMINATE, at, blueprint=blueprint, tempo=self.config.tempo)
        return Action.row(Op.WAIT)

    # --- the measurements -------------------------------------------------------------------------

    def noise(self, contribution: float) -> float:
        """Standard error of a contribution measured on the validation images (at least that of a
        paired difference whose discordant images are just those that make it)."""
        n = self.config.validation_images
        return math.sqrt(max(abs(contribution), 1.0 / n) / n)

    def _clears(self, value: float | None, sign: float) -> bool:
        return value is not None and sign * value > self.config.z * self.noise(value)

    def helps(self, slot: SeedSlot) -> bool:
        """The seed's last two contributions both clear their noise above 0."""
        return self._clears(slot.contribution, 1.0) and self._clears(slot.prev_contribution, 1.0)

    def hurts(self, slot: SeedSlot) -> bool:
        """The seed's last two contributions both clear their noise below 0, while it is blended in."""
        blended = slot.stage in (SeedStage.BLENDING, SeedStage.HOLDING)
        return blended and self._clears(slot.contribution, -1.0) and self._clears(slot.prev_contribution, -1.0)

    def _unproven(self, slot: SeedSlot) -> bool:
        """Held for ``hold_epochs`` without clearing its noise (a last reading that clears it earns one more)."""
        return (slot.stage is SeedStage.HOLDING and slot.epochs_in_stage >= self.config.hold_epochs
                and not self._clears(slot.contribution, 1.0))

    def plateaued(self, env: EnvSignals) -> bool:
        """The last ``plateau_epochs`` accuracies did not beat the best before them by ``plateau_delta``."""
        accs, k = list(env.acc_history), self.config.plateau_epochs
        if len(accs) <= k:
            return False
        return max(accs[-k:]) < max(accs[:-k]) + self.config.plateau_delta

    def _lead(self) -> int:
        """Epochs from germination to a fossilization judged on two readings, with one to spare: training,
        blending in, one epoch holding at full alpha, one more reading."""
        return self.lifecycle.min_training_epochs + self.config.tempo + 2

    def _time_left(self, env: EnvSignals) -> bool:
        return env.epoch_in_episode + self._lead() <= env.episode_length - 1

    def _last_chance(self, env: EnvSignals) -> bool:
        return env.epoch_in_episode + self._lead() == env.episode_length - 1

    def _ready(self, slot: SeedSlot) -> bool:
        if slot.stage is SeedStage.GERMINATED:
            return True
        if slot.stage is SeedStage.TRAINING:
            g = slot.grads
            return (slot.epochs_in_stage >= self.lifecycle.min_training_epochs and g.measurements > 0
                    and not g.exploding and (g.health or 0.0) >= self.lifecycle.min_gradient_health)
        return slot.stage is SeedStage.BLENDING and slot.alpha.holding and slot.alpha.alpha >= 1.0

    # --- blueprints -------------------------------------------------------------------------------

    def _judge(self, index: int, slot: SeedSlot, env: EnvSignals) -> None:
        host = getattr(env, "host_size", 0)
        rent = self.config.rent_per_pct * 100.0 * slot.params / host if host else 0.0
        key = (index, slot.blueprint or "")
        self.records.setdefault(key, BlueprintRecord()).outcomes.append((slot.contribution or 0.0) - rent)

    def choose(self, free: list[int]) -> tuple[int, str]:
        """The (slot, blueprint) to germinate: an untried pair first (catalogue order, then slot order),
        then the best mean outcome plus its exploration bonus."""
        pairs = [(i, bp) for bp in self.config.blueprints for i in free]
        untried = [p for p in pairs if p not in self.records]
        if untried:
            return untried[0]
        total = sum(len(self.records[p].outcomes) for p in pairs)

        def score(p: tuple[int, str]) -> float:
            r = self.records[p]
            return r.mean + self.config.explore * math.sqrt(math.log(total) / len(r.outcomes))
        return max(pairs, key=score)
