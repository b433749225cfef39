"""The PPO update pinned by numbers: the clipped surrogate and the value loss against hand-computed values,
and a two-armed bandit that the update must learn while keeping each step inside the clip."""

import math

import pytest
import torch

from trainer.simic.ppo import STAT_NAMES, PPOConfig, clipped_surrogate, policy_loss, ppo_update, value_loss
from trainer.simic.rollout import RolloutBatch, compute_gae
from trainer.tamiyo.actions import N_OPS, Op
from trainer.tamiyo.features import obs_dim
from trainer.tamiyo.policy import ActorCritic, PolicyConfig

CLIP = 0.2


@pytest.fixture(autouse=True)
def one_thread():
    """These updates are tiny: one intra-op thread runs them several times faster on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_clipped_surrogate_by_hand():
    """Two decisions, advantage +2 and −1, each at ratios below, inside and above the clip range."""
    ratio = torch.tensor([[0.5, 1.1, 1.5], [0.5, 1.1, 1.5]])
    adv = torch.tensor([[2.0], [-1.0]])
    expected = torch.tensor([
        [min(0.5 * 2, 0.8 * 2), min(1.1 * 2, 1.1 * 2), min(1.5 * 2, 1.2 * 2)],     # 1.0, 2.2, 2.4
        [min(0.5 * -1, 0.8 * -1), min(1.1 * -1, 1.1 * -1), min(1.5 * -1, 1.2 * -1)],  # −0.8, −1.1, −1.5
    ])
    torch.testing.assert_close(expected, torch.tensor([[1.0, 2.2, 2.4], [-0.8, -1.1, -1.5]]))
    torch.testing.assert_close(clipped_surrogate(ratio, adv, CLIP), expected)


def test_policy_loss_by_hand():
    """Minus the surrogate, averaged per head over the decisions that used it, summed over the heads."""
    ratio = torch.tensor([[[1.5, 0.5]], [[0.5, 3.0]]])    # [E=2, T=1, heads=2]
    adv = torch.tensor([[1.0], [-1.0]])
    used = torch.tensor([[[1.0, 1.0]], [[1.0, 0.0]]])     # the second decision did not use head 1
    head_counts = used.sum(dim=(0, 1))                    # 2 and 1
    # head 0: (min(1.5, 1.2) + min(−0.5, −0.8)) / 2 = (1.2 − 0.8) / 2 = 0.2; head 1: min(0.5, 0.8) / 1 = 0.5
    assert policy_loss(ratio, adv, used, head_counts, CLIP).item() == pytest.approx(-(0.2 + 0.5))


def test_value_loss_by_hand():
    values, targets = torch.tensor([[1.0, 2.0], [0.0, -1.0]]), torch.tensor([[0.0, 2.0], [2.0, -1.0]])
    assert value_loss(values, targets).item() == pytest.approx(0.5 * (1 + 0 + 4 + 0) / 4)
    # With several ranks each rank holds its share of the mean over all of their decisions.
    assert value_loss(values, targets, torch.tensor(8.0)).item() == pytest.approx(0.5 * 5 / 8)


# --- a two-armed bandit: FOSSILIZE pays 1, WAIT pays 0, one decision per episode -----------------------

ARMS = (int(Op.WAIT), int(Op.FOSSILIZE))
EPISODES = 64


def _bandit_policy() -> ActorCritic:
    torch.manual_seed(0)
    return ActorCritic(PolicyConfig(obs_dim(1), 1, hidden=16))


def _bandit_batch(policy: ActorCritic, g: torch.Generator) -> RolloutBatch:
    obs = torch.zeros(EPISODES, 1, obs_dim(1))
    op_mask = torch.zeros(EPISODES, 1, N_OPS, dtype=torch.bool)
    op_mask[..., list(ARMS)] = True
    slot_mask = torch.ones(EPISODES, 1, N_OPS, 1, dtype=torch.bool)
    with torch.no_grad():
        out = policy.act(obs[:, 0], policy.initial_state(EPISODES), op_mask[:, 0], slot_mask[:, 0], g)
    actions, values = out.actions[:, None], out.value[:, None]
    rewards = (actions[..., 0] == int(Op.FOSSILIZE)).float()
    adv, ret = compute_gae(rewards, values, 0.0, 0.0)
    return RolloutBatch(obs, op_mask, slot_mask, actions, out.log_probs[:, None], values, adv, ret)


def _p_fossilize(policy: ActorCritic) -> float:
    batch = _bandit_batch(policy, torch.Generator().manual_seed(0))
    actions = batch.actions.clone()
    actions[..., 0] = int(Op.FOSSILIZE)
    with torch.no_grad():
        log_probs, _, _ = policy.evaluate(batch.obs, batch.op_mask, batch.slot_mask, actions,
                                          policy.initial_state(EPISODES))
    return math.exp(log_probs[0, 0, 0].item())


def test_the_update_learns_a_two_armed_bandit():
    """A sign error in the loss learns the wrong arm."""
    policy = _bandit_policy()
    cfg = PPOConfig(lr=1e-2, update_epochs=4, target_kl=10.0, entropy_coef=0.0)
    optim = torch.optim.Adam(policy.parameters(), lr=cfg.lr)
    g = torch.Generator().manual_seed(1)
    before = _p_fossilize(policy)
    for _ in range(15):
        ppo_update(policy, optim, _bandit_batch(policy, g), cfg)
    after = _p_fossilize(policy)
    assert 0.2 < before < 0.8 and after > 0.9, (before, after)


def test_one_update_stays_inside_the_clip():
    """However many epochs one update runs on its batch, the policy stops moving a decision's probability
    once its ratio leaves ``1 ± clip`` in the direction its advantage favours: without the clamp, or with
    the maximum in place of the minimum, it keeps going."""
    policy = _bandit_policy()
    batch = _bandit_batch(policy, torch.Generator().manual_seed(2))
    # Plain SGD in small steps: no momentum carries the policy past where the gradient stopped.
    cfg = PPOConfig(lr=0.1, update_epochs=100, clip=CLIP, target_kl=1e9, entropy_coef=0.0, value_coef=0.0)
    m = ppo_update(policy, torch.optim.SGD(policy.parameters(), lr=cfg.lr), batch, cfg)
    with torch.no_grad():
        log_probs, _, _ = policy.evaluate(batch.obs, batch.op_mask, batch.slot_mask, batch.actions,
                                          policy.initial_state(EPISODES))
    ratio = (log_probs - batch.log_probs)[..., 0].exp().flatten()
    adv = batch.advantages.flatten()
    adv = adv - adv.mean()  # the update normalizes them: the paying arm's are above the mean
    assert (adv > 0).any() and (adv < 0).any()
    assert ratio[adv > 0].max().item() < 1 + CLIP + 0.05, ratio[adv > 0].max().item()
    assert ratio[adv < 0].min().item() > 1 - CLIP - 0.05, ratio[adv < 0].min().item()
    assert m.clip_fraction > 0 and m.update_epochs == 100


def test_figures_are_named():
    """What travels in the update's one transfer is read by name, the heads' entropies included."""
    assert STAT_NAMES[:3] == ("loss", "policy_loss", "value_loss")
    assert "entropy.op" in STAT_NAMES and len(set(STAT_NAMES)) == len(STAT_NAMES)
