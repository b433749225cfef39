"""Observation features (23 base + 31 per slot) and the running normalizer that is frozen during a rollout.

Values never measured are −1, as the policy was trained to read them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import torch

from leyline.esper import SeedStage
from trainer.kasmina.alpha import AlphaMode
from trainer.kasmina.lifecycle import STAGE_CODE, STAGES
from trainer.kasmina.slot import BLEND_STYLES, SeedSlot
from trainer.tamiyo.actions import N_OPS

BASE_FEATURES = 23
SLOT_FEATURES = 31
HISTORY = 5
NEVER = -1.0


def obs_dim(n_slots: int) -> int:
    return BASE_FEATURES + SLOT_FEATURES * n_slots


class EnvSignals(Protocol):
    """What the features read from one env at the end of an epoch."""

    epoch_in_episode: int
    episode_length: int
    val_loss: float
    val_acc: float
    last_action_ok: bool
    last_op: int

    @property
    def loss_history(self) -> Sequence[float]: ...

    @property
    def acc_history(self) -> Sequence[float]: ...

    @property
    def slots(self) -> Sequence[SeedSlot]: ...


def _padded(values: Sequence[float]) -> list[float]:
    recent = list(values)[-HISTORY:]
    return [NEVER] * (HISTORY - len(recent)) + recent


def base_features(env: EnvSignals) -> list[float]:
    stages = [s.stage for s in env.slots]
    n = max(len(stages), 1)
    incubating = sum(s in (SeedStage.GERMINATED, SeedStage.TRAINING) for s in stages) / n
    blended = sum(s in (SeedStage.BLENDING, SeedStage.HOLDING) for s in stages) / n
    fossil = sum(s is SeedStage.FOSSILIZED for s in stages) / n
    last_op = [0.0] * N_OPS
    last_op[env.last_op] = 1.0
    return [env.epoch_in_episode / env.episode_length, env.val_loss, env.val_acc,
            *_padded(env.loss_history), *_padded(env.acc_history),
            incubating, blended, fossil, float(env.last_action_ok), *last_op]


def slot_features(slot: SeedSlot, episode_length: int) -> list[float]:
    stage = [0.0] * len(STAGES)
    stage[STAGE_CODE[slot.stage]] = 1.0
    contribution = NEVER if slot.contribution is None else slot.contribution
    velocity = (NEVER if slot.contribution is None or slot.prev_contribution is None
                else slot.contribution - slot.prev_contribution)
    mode = [float(slot.alpha.mode is m) for m in AlphaMode]
    g = slot.grads
    measured = g.measurements > 0
    style = [float(slot.seed is not None and slot.seed.style == s) for s in BLEND_STYLES]
    return [
        float(slot.seed is not None), *stage, slot.alpha.alpha, contribution, velocity,
        slot.tempo / 8.0, slot.alpha.target, *mode, slot.alpha.progress,
        math.log1p(g.norm) if measured and g.norm is not None and math.isfinite(g.norm) else NEVER,
        g.health if measured and g.health is not None else NEVER,
        float(g.vanishing), float(g.exploding),
        slot.epochs_in_stage / episode_length, slot.age / episode_length,
        *style, g.ratio_ema if g.ratio_ema is not None else NEVER,
        float(slot.pruning),
    ]


def build_observations(envs: Sequence[EnvSignals]) -> torch.Tensor:
    """[n_envs, obs_dim] float32 on the CPU."""
    rows = []
    for env in envs:
        row = base_features(env)
        for slot in env.slots:
            row += slot_features(slot, env.episode_length)
        rows.append(row)
    obs = torch.tensor(rows, dtype=torch.float32)
    return torch.nan_to_num(obs, nan=NEVER, posinf=10.0, neginf=-10.0)


class RunningNormalizer:
    """Running mean and variance per feature (parallel Welford); frozen between ``update`` calls."""

    def __init__(self, dim: int, clip: float = 5.0, eps: float = 1e-4) -> None:
        self.mean = torch.zeros(dim, dtype=torch.float64)
        self.var = torch.ones(dim, dtype=torch.float64)
        self.count = eps
        self.clip = clip

    def update(self, batch: torch.Tensor) -> None:
        x = batch.reshape(-1, self.mean.shape[0]).double()
        n = x.shape[0]
        if n == 0:
            return
        b_mean, b_var = x.mean(0), x.var(0, unbiased=False)
        total = self.count + n
        delta = b_mean - self.mean
        self.mean = self.mean + delta * n / total
        self.var = (self.var * self.count + b_var * n + delta**2 * self.count * n / total) / total
        self.count = total

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        mean = self.mean.to(obs.device, torch.float32)
        std = self.var.to(obs.device, torch.float32).add(1e-8).sqrt()
        return ((obs - mean) / std).clamp(-self.clip, self.clip)
