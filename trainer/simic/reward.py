"""The reward, for all envs at once as tensor ops over struct-of-arrays inputs.

reward = contribution attribution − parameter and compute rent + potential-based shaping − action costs
         (+ a terminal bonus from final accuracy); normalized by a running std and clipped.

A fossilized seed's contribution is paid in full, a seed still blending or holding earns only
``blending_share`` of its own: fossilizing a seed that helps is worth more than leaving it blending,
and fossilizing one that hurts costs more. The rent charges every attached seed for the parameters
and the training compute it adds, so a gain must pay for its size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from trainer.tamiyo.actions import N_OPS


@dataclass(frozen=True)
class RewardConfig:
    """Weights of the reward's terms."""

    contribution_weight: float = 10.0
    """Scale of the summed counterfactual contributions of blended seeds (accuracy fractions)."""
    blending_share: float = 0.5
    """Share of its contribution a seed earns while blending or holding (fossilized: all of it)."""
    rent_weight: float = 0.2
    """Scale of the parameter rent ``min(0.5·ln(1 + extra/host), 1.5)``."""
    compute_rent_weight: float = 0.2
    """Scale of the compute rent ``min(extra compute / host compute, 1.5)`` (per training image)."""
    pbrs_weight: float = 0.1
    """Scale of the potential-based shaping ``γ·Φ(s') − Φ(s)`` over stage potentials."""
    gamma: float = 0.995
    """Discount used by the shaping term (the same γ as GAE keeps it policy-invariant)."""
    action_costs: tuple[float, ...] = (0.0, 0.02, 0.01, 0.01, 0.0, 0.0)
    """Cost per op (``Op`` order: WAIT, GERMINATE, SET_ALPHA_TARGET, PRUNE, FOSSILIZE, ADVANCE)."""
    failed_action_cost: float = 0.02
    """Extra cost when an op's gate refused it."""
    terminal_weight: float = 5.0
    """Terminal bonus per unit of final validation accuracy."""
    clip: float = 10.0
    """Normalized rewards are clipped to ±clip."""

    def __post_init__(self) -> None:
        if len(self.action_costs) != N_OPS:
            raise ValueError(f"action_costs needs {N_OPS} entries")
        if self.clip <= 0 or not 0 < self.gamma <= 1:
            raise ValueError("clip must be > 0 and gamma in (0, 1]")
        if not 0.0 <= self.blending_share <= 1.0:
            raise ValueError("blending_share must be in [0, 1]")


@dataclass(frozen=True)
class RewardInputs:
    """Everything the reward reads, one row per env ([E] or [E, S] CPU tensors)."""

    contributions: torch.Tensor
    """[E, S] counterfactual contribution per slot (NaN: not measured)."""
    blended: torch.Tensor
    """[E, S] the slot's seed is part of the forward value (BLENDING/HOLDING/FOSSILIZED)."""
    extra_params: torch.Tensor
    """[E] parameters of attached seeds."""
    host_params: float
    potential_prev: torch.Tensor
    """[E] stage potential before the action."""
    potential_now: torch.Tensor
    """[E] stage potential after the action and one epoch."""
    op: torch.Tensor
    """[E] the op that was taken."""
    action_ok: torch.Tensor
    """[E] the op succeeded (its gate passed)."""
    terminal: bool
    accuracy: torch.Tensor
    """[E] validation accuracy now."""
    fossilized: torch.Tensor | None = None
    """[E, S] the slot's seed is fossilized (None: none is)."""
    extra_compute: torch.Tensor | None = None
    """[E] training compute of the attached seeds over the host's (None: not charged)."""


@dataclass(frozen=True)
class RewardTerms:
    total: torch.Tensor
    attribution: torch.Tensor
    rent: torch.Tensor
    shaping: torch.Tensor
    cost: torch.Tensor
    terminal: torch.Tensor


def compute_rewards(inp: RewardInputs, cfg: RewardConfig) -> RewardTerms:
    """Raw (unnormalized) rewards for all envs; no Python loop over envs."""
    measured = torch.nan_to_num(inp.contributions, nan=0.0) * inp.blended
    if inp.fossilized is not None:
        measured = measured * torch.where(inp.fossilized, 1.0, cfg.blending_share)
    else:
        measured = measured * cfg.blending_share
    attribution = cfg.contribution_weight * measured.sum(dim=1)
    rent = cfg.rent_weight * torch.clamp(0.5 * torch.log1p(inp.extra_params / inp.host_params), max=1.5)
    if inp.extra_compute is not None:
        rent = rent + cfg.compute_rent_weight * torch.clamp(inp.extra_compute, max=1.5)
    shaping = cfg.pbrs_weight * (cfg.gamma * inp.potential_now - inp.potential_prev)
    costs = torch.tensor(cfg.action_costs, dtype=torch.float32)
    cost = costs[inp.op] + cfg.failed_action_cost * (~inp.action_ok).float()
    terminal = cfg.terminal_weight * inp.accuracy if inp.terminal else torch.zeros_like(inp.accuracy)
    total = attribution - rent + shaping - cost + terminal
    return RewardTerms(total, attribution, rent, shaping, cost, terminal)


class RewardNormalizer:
    """Divides rewards by a running standard deviation and clips them."""

    def __init__(self, clip: float = 10.0) -> None:
        self.clip, self.count, self.mean, self.m2 = clip, 0, 0.0, 0.0

    def update(self, rewards: torch.Tensor) -> None:
        for value in rewards.flatten().double().tolist():
            self.count += 1
            delta = value - self.mean
            self.mean += delta / self.count
            self.m2 += delta * (value - self.mean)

    @property
    def std(self) -> float:
        return math.sqrt(self.m2 / self.count) if self.count > 1 else 1.0

    def __call__(self, rewards: torch.Tensor) -> torch.Tensor:
        return (rewards / max(self.std, 1e-6)).clamp(-self.clip, self.clip)
