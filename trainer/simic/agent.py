"""Who decides: the PPO agent (LSTM actor-critic, rollout buffer, update) or the heuristic.

Both see every env at once: one batched decision per epoch, returned as ONE CPU tensor of head
indices [n_envs, n_heads] (for PPO, a single stacked device→host copy).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Sequence
from typing import Protocol

import torch
from torch import nn

from leyline.esper import HEAD_NAMES
from ranks import Ranks, tensor_bytes
from trainer.kasmina.host import inductor_mode
from trainer.simic.ppo import PPOConfig, PPOMetrics, ppo_update
from trainer.simic.reward import RewardNormalizer
from trainer.simic.rollout import ReturnNormalizer, RolloutBuffer
from trainer.simic.sites import PolicySignals
from trainer.tamiyo.features import EnvSignals, RunningNormalizer, build_observations, obs_dim
from trainer.tamiyo.heuristic import HeuristicPolicy
from trainer.tamiyo.policy import ActorCritic, LSTMState, PolicyConfig


class Agent(Protocol):
    def begin_round(self, n_envs: int) -> None: ...

    @property
    def act_signals(self) -> PolicySignals | None:
        """What the last decision showed of the policy (None: nothing learned to watch)."""
        ...

    def act(self, t: int, envs: Sequence[EnvSignals], op_mask: torch.Tensor,
            slot_mask: torch.Tensor) -> torch.Tensor:
        """Decision ``t`` of the episode for every env: [n_envs, n_heads] long, on the CPU."""
        ...

    def record_rewards(self, t: int, rewards: torch.Tensor) -> None: ...

    def update(self, after_backward: Callable[[nn.Module], None] | None = None
               ) -> tuple[PPOMetrics, LSTMState] | None:
        """End of round: learn from the episode (None: nothing to learn); returns the update's
        figures and the LSTM state at the end of the rollout."""
        ...

    def state_dict(self) -> dict[str, object]:
        """What a checkpoint at a round boundary keeps of the agent (``load_state_dict`` restores it)."""
        ...

    def load_state_dict(self, state: dict) -> None: ...


class HeuristicAgent:
    def __init__(self, policy: HeuristicPolicy) -> None:
        self.policy = policy

    act_signals: PolicySignals | None = None

    def begin_round(self, n_envs: int) -> None:
        return None

    def state_dict(self) -> dict[str, object]:
        return self.policy.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.policy.load_state_dict(state)

    def act(self, t: int, envs: Sequence[EnvSignals], op_mask: torch.Tensor,
            slot_mask: torch.Tensor) -> torch.Tensor:
        return self.policy.act(envs, op_mask, slot_mask)

    def record_rewards(self, t: int, rewards: torch.Tensor) -> None:
        return None

    def update(self, after_backward: Callable[[nn.Module], None] | None = None
               ) -> tuple[PPOMetrics, LSTMState] | None:
        return None


class PPOAgent:
    """The learned policy: acts from normalized features, stores the rollout, updates once per round."""

    def __init__(self, n_slots: int, hidden: int, cfg: PPOConfig, episode_length: int,
                 device: torch.device, seed: int, reward_clip: float = 10.0, compile_mode: str = "off",
                 ranks: Ranks | None = None) -> None:
        self.cfg, self.device, self.n_slots = cfg, device, n_slots
        self.ranks = ranks or Ranks.single()
        """With several ranks: one policy. Every rank starts from rank 0's weights, each update sees every
        rank's rollout (gradients summed, normalizers fed every rank's data), so the weights stay equal."""
        self.n_steps = episode_length - 1  # no decision after the last epoch
        self.policy = ActorCritic(PolicyConfig(obs_dim(n_slots), n_slots, hidden)).to(device)
        self.ranks.broadcast_([*self.policy.parameters(), *self.policy.buffers()])
        if compile_mode != "off":
            self.policy.compile_policy(inductor_mode(compile_mode))
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=cfg.lr, eps=1e-5)
        self.obs_norm = RunningNormalizer(obs_dim(n_slots))
        self.reward_norm = RewardNormalizer(reward_clip)
        self.value_norm = ReturnNormalizer()
        self.generator = torch.Generator(device=device).manual_seed(seed)
        self.buffer: RolloutBuffer | None = None
        self.state: LSTMState | None = None
        self._raw_obs: list[torch.Tensor] = []
        self.act_signals: PolicySignals | None = None

    def state_dict(self) -> dict[str, object]:
        """Everything the next round depends on (at a round boundary: the rollout is empty). Tensors are
        the live ones: a checkpoint copies them."""
        o, r, v = self.obs_norm, self.reward_norm, self.value_norm
        return {"policy": self.policy.state_dict(), "optimizer": self.optimizer.state_dict(),
                "obs_norm": {"mean": o.mean, "var": o.var, "count": o.count},
                "reward_norm": {"count": r.count, "mean": r.mean, "m2": r.m2},
                "value_norm": {"mean": v.mean, "var": v.var, "count": v.count},
                "generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.policy.load_state_dict(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        o, r, v = state["obs_norm"], state["reward_norm"], state["value_norm"]
        self.obs_norm.mean, self.obs_norm.var, self.obs_norm.count = o["mean"].double(), o["var"].double(), o["count"]
        self.reward_norm.count, self.reward_norm.mean, self.reward_norm.m2 = int(r["count"]), r["mean"], r["m2"]
        self.value_norm.mean, self.value_norm.var, self.value_norm.count = v["mean"], v["var"], v["count"]
        self.generator.set_state(state["generator"])

    def begin_round(self, n_envs: int) -> None:
        self.buffer = RolloutBuffer(n_envs, self.n_steps, obs_dim(self.n_slots), self.n_slots,
                                    len(HEAD_NAMES), self.device)
        self.state = self.policy.initial_state(n_envs, self.device)
        self._raw_obs = []

    def act(self, t: int, envs: Sequence[EnvSignals], op_mask: torch.Tensor,
            slot_mask: torch.Tensor) -> torch.Tensor:
        assert self.buffer is not None and self.state is not None, "begin_round first"
        raw = build_observations(envs)
        self._raw_obs.append(raw)
        # The normalizer is frozen for the whole rollout; it learns from it after the update.
        obs = self.obs_norm(raw).to(self.device, non_blocking=True)
        om, sm = op_mask.to(self.device, non_blocking=True), slot_mask.to(self.device, non_blocking=True)
        out = self.policy.act(obs, self.state, om, sm, self.generator)
        self.state = out.state
        self.buffer.add(t, obs, om, sm, out)
        assert out.entropy is not None
        # The one device→host copy: all heads of all envs, with the value and entropy riding along
        # (head indices are small integers, exact in float32).
        packed = torch.cat([out.actions.float(), out.value[:, None], out.entropy[:, None]], dim=1).cpu()
        self.act_signals = PolicySignals(tuple(packed[:, -2].tolist()), tuple(packed[:, -1].tolist()))
        return packed[:, :-2].long()

    def record_rewards(self, t: int, rewards: torch.Tensor) -> None:
        assert self.buffer is not None
        self.buffer.set_rewards(t, rewards)

    def update(self, after_backward: Callable[[nn.Module], None] | None = None
               ) -> tuple[PPOMetrics, LSTMState] | None:
        buf, state = self.buffer, self.state
        if buf is None or state is None or buf.filled == 0:
            return None
        gather = self.ranks.gather_cpu
        self.reward_norm.update(gather(buf.rewards[:, : buf.filled]))
        rewards = self.reward_norm(buf.rewards)
        batch = buf.batch(rewards, self.cfg.gamma, self.cfg.gae_lambda, self.value_norm, gather)
        metrics = ppo_update(self.policy, self.optimizer, batch, self.cfg, after_backward, self.ranks)
        self.obs_norm.update(gather(torch.stack(self._raw_obs), dim=1))
        if self.ranks.distributed:
            metrics = dataclasses.replace(metrics, policy_digest=weights_digest(self.policy))
        return metrics, state


def weights_digest(module: nn.Module) -> str:
    """A short digest of ``module``'s weights (one read of them all): equal digests, equal weights."""
    flat = torch.cat([p.detach().reshape(-1).float() for p in module.parameters()]).cpu()
    return hashlib.blake2b(tensor_bytes(flat), digest_size=8).hexdigest()
