"""The rollout buffer (one episode per env, preallocated on the policy's device) and GAE."""

from __future__ import annotations

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


@dataclass(frozen=True)
class RolloutBatch:
    """A round's sequences [E, T, …], ready for the PPO update."""

    obs: torch.Tensor
    op_mask: torch.Tensor
    slot_mask: torch.Tensor
    actions: torch.Tensor
    log_probs: torch.Tensor
    values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor


class RolloutBuffer:
    """One episode of ``n_steps`` decisions for each of ``n_envs`` envs."""

    def __init__(self, n_envs: int, n_steps: int, obs_dim: int, n_slots: int, n_heads: int,
                 device: torch.device) -> None:
        self.n_envs, self.n_steps = n_envs, n_steps
        kw = {"device": device}
        self.obs = torch.zeros(n_envs, n_steps, obs_dim, **kw)
        self.op_mask = torch.zeros(n_envs, n_steps, N_OPS, dtype=torch.bool, **kw)
        self.slot_mask = torch.zeros(n_envs, n_steps, N_OPS, n_slots, dtype=torch.bool, **kw)
        self.actions = torch.zeros(n_envs, n_steps, n_heads, dtype=torch.long, **kw)
        self.log_probs = torch.zeros(n_envs, n_steps, n_heads, **kw)
        self.values = torch.zeros(n_envs, n_steps, **kw)
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

    def batch(self, normalized_rewards: torch.Tensor, gamma: float, lam: float) -> RolloutBatch:
        """Sequences of the filled steps with advantages and returns (``normalized_rewards``: [E, T])."""
        n = self.filled
        values = self.values[:, :n]
        advantages, returns = compute_gae(normalized_rewards[:, :n].to(values.device), values, gamma, lam)
        return RolloutBatch(self.obs[:, :n], self.op_mask[:, :n], self.slot_mask[:, :n], self.actions[:, :n],
                            self.log_probs[:, :n], values, advantages, returns)
