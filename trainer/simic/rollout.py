"""The rollout buffer (one episode per env, preallocated on the policy's device) and GAE."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from trainer.tamiyo.actions import N_OPS
from trainer.tamiyo.policy import ActOutput


def compute_gae(rewards: torch.Tensor, values: torch.Tensor, gamma: float, lam: float,
                last_value: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimation per env over [E, T]; the episode ends after step T−1
    (``last_value`` None: terminal, bootstrap 0). Returns (advantages, returns)."""
    n_steps = rewards.shape[1]
    advantages = torch.zeros_like(rewards)
    next_value = torch.zeros_like(rewards[:, 0]) if last_value is None else last_value
    running = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(n_steps)):
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        running = delta + gamma * lam * running
        advantages[:, t] = running
        next_value = values[:, t]
    return advantages, advantages + values


class ReturnNormalizer:
    """Running mean and standard deviation of the value targets (the GAE returns).

    The critic predicts returns in these normalized units, so it never has to climb to the
    returns' scale one small Adam step at a time: a round holds only n_envs × (T − 1) decisions
    and one update, and an unnormalized critic spent a whole run short of the mean return
    (explained variance far below 0). Identity until the first ``update``.
    """

    def __init__(self, eps: float = 1e-4) -> None:
        self.mean, self.var, self.count = 0.0, 1.0, eps

    def update(self, returns: torch.Tensor) -> None:
        x = returns.detach().double().flatten().cpu()
        n = x.numel()
        if n == 0:
            return
        b_mean, b_var = float(x.mean()), float(x.var(unbiased=False))
        total = self.count + n
        delta = b_mean - self.mean
        self.mean += delta * n / total
        self.var = (self.var * self.count + b_var * n + delta**2 * self.count * n / total) / total
        self.count = total

    @property
    def std(self) -> float:
        return max(self.var, 1e-8) ** 0.5

    def normalize(self, returns: torch.Tensor) -> torch.Tensor:
        return (returns - self.mean) / self.std

    def denormalize(self, values: torch.Tensor) -> torch.Tensor:
        return values * self.std + self.mean


@dataclass(frozen=True)
class RolloutBatch:
    """A round's sequences [E, T, …], ready for the PPO update."""

    obs: torch.Tensor
    op_mask: torch.Tensor
    slot_mask: torch.Tensor
    actions: torch.Tensor
    log_probs: torch.Tensor
    values: torch.Tensor
    """The critic's estimates at rollout time, in return units."""
    advantages: torch.Tensor
    returns: torch.Tensor
    value_targets: torch.Tensor | None = None
    """What the critic's output is regressed on (normalized returns); None: ``returns``."""


class RolloutBuffer:
    """One episode of ``n_steps`` decisions for each of ``n_envs`` envs."""

    def __init__(self, n_envs: int, n_steps: int, obs_dim: int, n_slots: int, n_heads: int,
                 device: torch.device) -> None:
        self.n_envs, self.n_steps = n_envs, n_steps
        self.obs = torch.zeros(n_envs, n_steps, obs_dim, device=device)
        self.op_mask = torch.zeros(n_envs, n_steps, N_OPS, dtype=torch.bool, device=device)
        self.slot_mask = torch.zeros(n_envs, n_steps, N_OPS, n_slots, dtype=torch.bool, device=device)
        self.actions = torch.zeros(n_envs, n_steps, n_heads, dtype=torch.long, device=device)
        self.log_probs = torch.zeros(n_envs, n_steps, n_heads, device=device)
        self.values = torch.zeros(n_envs, n_steps, device=device)
        self.rewards = torch.zeros(n_envs, n_steps)  # raw, CPU: the reward is computed there
        self.filled = 0

    def add(self, t: int, obs: torch.Tensor, op_mask: torch.Tensor, slot_mask: torch.Tensor,
            out: ActOutput) -> None:
        """Store decision ``t`` of every env (device tensors: no transfer)."""
        self.obs[:, t], self.op_mask[:, t], self.slot_mask[:, t] = obs, op_mask, slot_mask
        self.actions[:, t], self.log_probs[:, t], self.values[:, t] = out.actions, out.log_probs, out.value
        self.filled = max(self.filled, t + 1)

    def set_rewards(self, t: int, rewards: torch.Tensor) -> None:
        self.rewards[:, t] = rewards

    def batch(self, normalized_rewards: torch.Tensor, gamma: float, lam: float,
              value_norm: ReturnNormalizer | None = None,
              gather: Callable[[torch.Tensor], torch.Tensor] | None = None) -> RolloutBatch:
        """Sequences of the filled steps with advantages and returns (``normalized_rewards``: [E, T]).

        With ``value_norm`` the stored critic outputs are read in its units, it then learns the
        round's returns (``gather``: every rank's, so that the ranks' normalizers stay one), and the
        critic's targets are the returns in its new units."""
        n = self.filled
        values = self.values[:, :n]
        if value_norm is not None:
            values = value_norm.denormalize(values)
        advantages, returns = compute_gae(normalized_rewards[:, :n].to(values.device), values, gamma, lam)
        targets = None
        if value_norm is not None:
            value_norm.update(returns if gather is None else gather(returns))
            targets = value_norm.normalize(returns)
        return RolloutBatch(self.obs[:, :n], self.op_mask[:, :n], self.slot_mask[:, :n], self.actions[:, :n],
                            self.log_probs[:, :n], values, advantages, returns, targets)
