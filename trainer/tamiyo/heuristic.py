"""Heuristic Tamiyo: germinate when accuracy plateaus, advance healthy seeds, prune seeds that hurt,
fossilize holding seeds that help. It reads the same signals and masks as the learned policy."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from leyline import SeedStage

from trainer.kasmina.lifecycle import LifecycleConfig
from trainer.kasmina.slot import SeedSlot
from trainer.tamiyo.actions import Action, Op
from trainer.tamiyo.features import EnvSignals


@dataclass(frozen=True)
class HeuristicConfig:
    """When the heuristic acts."""

    plateau_delta: float = 0.01
    """Accuracy gain per epoch below which training counts as plateaued."""
    patience: int = 2
    """Epoch of the episode from which it germinates even without a plateau."""
    prune_below: float = -0.02
    """Prune a blended seed whose last two contributions were both below this (one noisy
    measurement is not enough)."""
    blueprints: tuple[str, ...] = ("conv_light", "attention", "depthwise", "conv_heavy")
    """Blueprints tried in turn."""

    def __post_init__(self) -> None:
        if self.patience < 0 or not self.blueprints:
            raise ValueError("patience must be >= 0 and at least one blueprint given")


class HeuristicPolicy:
    """Rule-based lifecycle decisions, one env at a time (cheap: no tensors, no device work)."""

    def __init__(self, config: HeuristicConfig, lifecycle: LifecycleConfig) -> None:
        self.config, self.lifecycle = config, lifecycle
        self._germinations = 0

    def act(self, envs: Sequence[EnvSignals], op_mask: torch.Tensor, slot_mask: torch.Tensor) -> torch.Tensor:
        """[n_envs, n_heads] head indices, always legal under the masks."""
        return torch.tensor([self._decide(env, slot_mask[e].tolist()) for e, env in enumerate(envs)],
                            dtype=torch.long)

    def _decide(self, env: EnvSignals, allowed: list[list[bool]]) -> list[int]:
        slots = list(env.slots)
        for i, slot in enumerate(slots):
            if allowed[Op.FOSSILIZE][i] and (slot.contribution or 0.0) > 0.0:
                return Action.row(Op.FOSSILIZE, i)
        for i, slot in enumerate(slots):
            hurts = all(c is not None and c < self.config.prune_below
                        for c in (slot.contribution, slot.prev_contribution))
            if allowed[Op.PRUNE][i] and hurts and slot.stage in (SeedStage.BLENDING, SeedStage.HOLDING):
                return Action.row(Op.PRUNE, i)
        for i, slot in enumerate(slots):
            if allowed[Op.ADVANCE][i] and self._ready(slot):
                return Action.row(Op.ADVANCE, i)
        free = [i for i, ok in enumerate(allowed[Op.GERMINATE]) if ok]
        if free and self._plateaued(env):
            blueprint = self.config.blueprints[self._germinations % len(self.config.blueprints)]
            slot = free[self._germinations % len(free)]
            self._germinations += 1
            return Action.row(Op.GERMINATE, slot, blueprint=blueprint)
        return Action.row(Op.WAIT)

    def _ready(self, slot: SeedSlot) -> bool:
        if slot.stage is SeedStage.GERMINATED:
            return True
        if slot.stage is SeedStage.TRAINING:
            g = slot.grads
            return (slot.epochs_in_stage >= self.lifecycle.min_training_epochs and g.measurements > 0
                    and not g.exploding and (g.health or 0.0) >= self.lifecycle.min_gradient_health)
        return slot.stage is SeedStage.BLENDING and slot.alpha.holding and slot.alpha.alpha >= 1.0

    def _plateaued(self, env: EnvSignals) -> bool:
        accs = list(env.acc_history)
        if len(accs) >= 2 and accs[-1] - accs[-2] < self.config.plateau_delta:
            return True
        return env.epoch_in_episode >= self.config.patience
