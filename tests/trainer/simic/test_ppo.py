"""PPO on a fixed batch: the loss falls, clipping engages, KL early stop works, the defaults move the policy."""

import torch

from trainer.build import build_agent
from trainer.simic.agent import PPOAgent
from trainer.simic.config import TrainConfig
from trainer.simic.ppo import PPOConfig, ppo_update
from trainer.simic.rollout import RolloutBatch, compute_gae
from trainer.tamiyo.features import obs_dim
from trainer.tamiyo.policy import ActorCritic, PolicyConfig

N_SLOTS, ENVS, STEPS = 2, 4, 6


def _fixed_batch(policy: ActorCritic) -> RolloutBatch:
    g = torch.Generator().manual_seed(3)
    obs = torch.randn(ENVS, STEPS, obs_dim(N_SLOTS), generator=g)
    op_mask = torch.ones(ENVS, STEPS, 6, dtype=torch.bool)
    slot_mask = torch.ones(ENVS, STEPS, 6, N_SLOTS, dtype=torch.bool)
    state = policy.initial_state(ENVS)
    acts, lps, vals = [], [], []
    for t in range(STEPS):
        out = policy.act(obs[:, t], state, op_mask[:, t], slot_mask[:, t], g)
        state = out.state
        acts.append(out.actions), lps.append(out.log_probs), vals.append(out.value)
    values = torch.stack(vals, 1)
    rewards = torch.randn(ENVS, STEPS, generator=g)
    adv, ret = compute_gae(rewards, values, 0.99, 0.95)
    return RolloutBatch(obs, op_mask, slot_mask, torch.stack(acts, 1), torch.stack(lps, 1), values, adv, ret)


def _policy():
    torch.manual_seed(0)
    return ActorCritic(PolicyConfig(obs_dim(N_SLOTS), N_SLOTS, hidden=32))


def test_fixed_batch_loss_falls_and_clipping_engages():
    policy = _policy()
    batch = _fixed_batch(policy)
    cfg = PPOConfig(lr=3e-3, update_epochs=8, target_kl=10.0, entropy_coef=0.0)
    optim = torch.optim.Adam(policy.parameters(), lr=cfg.lr)
    seen_backward = []
    m = ppo_update(policy, optim, batch, cfg, after_backward=seen_backward.append)
    assert m.update_epochs == 8 and not m.early_stopped and len(seen_backward) == 8
    assert m.losses[-1] < m.losses[0]
    assert m.clip_fraction > 0.0
    assert m.ratio_min < 1.0 < m.ratio_max
    assert m.approx_kl > 0.0 and m.grad_norm > 0.0
    assert set(m.entropy) >= {"op", "slot", "blueprint"}
    assert m.explained_variance is not None


def test_first_epoch_ratio_is_one():
    """The ratio is against the rollout's stored log-probs: before any step it is exactly 1."""
    policy = _policy()
    batch = _fixed_batch(policy)
    m = ppo_update(policy, torch.optim.SGD(policy.parameters(), lr=0.0), batch, PPOConfig(update_epochs=1))
    assert abs(m.ratio_min - 1.0) < 1e-5 and abs(m.ratio_max - 1.0) < 1e-5 and m.clip_fraction == 0.0


def test_kl_early_stop():
    policy = _policy()
    batch = _fixed_batch(policy)
    cfg = PPOConfig(lr=1e-2, update_epochs=10, target_kl=1e-4)
    m = ppo_update(policy, torch.optim.Adam(policy.parameters(), lr=cfg.lr), batch, cfg)
    assert m.early_stopped and m.update_epochs < 10


def test_default_update_moves_the_policy_towards_the_kl_target():
    """With the run's defaults, one update on a default-sized round (2 envs × 11 decisions) changes
    the policy by a real fraction of the KL target: too weak a step leaves the policy where it was."""
    config = TrainConfig()
    torch.manual_seed(0)
    agent = build_agent(config, torch.device("cpu"))
    assert isinstance(agent, PPOAgent)
    g = torch.Generator().manual_seed(5)
    envs, steps = config.n_envs, config.episode_length - 1
    obs = torch.randn(envs, steps, obs_dim(len(config.slots)), generator=g)
    op_mask = torch.ones(envs, steps, 6, dtype=torch.bool)
    slot_mask = torch.ones(envs, steps, 6, len(config.slots), dtype=torch.bool)
    state = agent.policy.initial_state(envs)
    acts, lps, vals = [], [], []
    for t in range(steps):
        out = agent.policy.act(obs[:, t], state, op_mask[:, t], slot_mask[:, t], g)
        state = out.state
        acts.append(out.actions), lps.append(out.log_probs), vals.append(out.value)
    values = torch.stack(vals, 1)
    adv, ret = compute_gae(torch.randn(envs, steps, generator=g), values, agent.cfg.gamma, agent.cfg.gae_lambda)
    batch = RolloutBatch(obs, op_mask, slot_mask, torch.stack(acts, 1), torch.stack(lps, 1), values, adv, ret)
    m = ppo_update(agent.policy, agent.optimizer, batch, agent.cfg)
    assert m.approx_kl > 0.1 * agent.cfg.target_kl
