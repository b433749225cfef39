"""GAE and the reward against numbers worked out by hand."""

import math

import pytest
import torch

from trainer.simic.reward import RewardConfig, RewardInputs, RewardNormalizer, compute_rewards
from trainer.simic.rollout import compute_gae
from trainer.tamiyo.actions import Op


def test_gae_matches_hand_computation():
    rewards = torch.tensor([[1.0, 2.0], [0.0, -1.0]])
    values = torch.tensor([[0.5, 1.0], [0.0, 0.0]])
    adv, ret = compute_gae(rewards, values, gamma=0.9, lam=0.8)
    # env 0: δ1 = 2 − 1 = 1; δ0 = 1 + 0.9·1 − 0.5 = 1.4; A0 = 1.4 + 0.9·0.8·1 = 2.12
    assert adv.tolist() == [pytest.approx([2.12, 1.0]), pytest.approx([-0.72, -1.0])]
    assert ret[0].tolist() == pytest.approx([2.62, 2.0])


def test_gae_bootstraps_from_last_value_when_given():
    adv, _ = compute_gae(torch.tensor([[1.0]]), torch.tensor([[0.0]]), 0.5, 1.0, last_value=torch.tensor([4.0]))
    assert adv.item() == pytest.approx(1.0 + 0.5 * 4.0)


def test_gae_with_lambda_one_is_the_discounted_return_minus_value():
    rewards = torch.tensor([[1.0, 1.0, 1.0]])
    values = torch.tensor([[0.3, 0.2, 0.1]])
    _, ret = compute_gae(rewards, values, gamma=0.5, lam=1.0)
    assert ret[0].tolist() == pytest.approx([1.75, 1.5, 1.0])


def _inputs(**over):
    base = dict(
        contributions=torch.tensor([[0.02, math.nan], [-0.01, 0.05]]),
        blended=torch.tensor([[True, False], [True, False]]),
        extra_params=torch.tensor([0.0, 1000.0]), host_params=1000.0,
        potential_prev=torch.tensor([0.0, 2.0]), potential_now=torch.tensor([1.0, 3.5]),
        op=torch.tensor([int(Op.GERMINATE), int(Op.ADVANCE)]), action_ok=torch.tensor([True, False]),
        terminal=False, accuracy=torch.tensor([0.5, 0.6]))
    base.update(over)
    return RewardInputs(**base)


def test_reward_terms_by_hand():
    cfg = RewardConfig(contribution_weight=10.0, rent_weight=1.0, pbrs_weight=0.1, gamma=0.9,
                       failed_action_cost=0.05, terminal_weight=2.0, blending_share=1.0)
    terms = compute_rewards(_inputs(), cfg)
    assert terms.attribution.tolist() == pytest.approx([0.2, -0.1])  # unblended 0.05 ignored
    assert terms.rent.tolist() == pytest.approx([0.0, 0.5 * math.log(2.0)])
    assert terms.shaping.tolist() == pytest.approx([0.1 * 0.9, 0.1 * (0.9 * 3.5 - 2.0)])
    assert terms.cost.tolist() == pytest.approx([0.02, 0.05])
    assert terms.terminal.tolist() == [0.0, 0.0]
    expected = [0.2 - 0.0 + 0.09 - 0.02, -0.1 - 0.5 * math.log(2.0) + 0.115 - 0.05]
    assert terms.total.tolist() == pytest.approx(expected)
    final = compute_rewards(_inputs(terminal=True), cfg)
    assert (final.total - terms.total).tolist() == pytest.approx([1.0, 1.2])


def test_a_fossilized_seed_earns_its_whole_contribution_a_blending_one_a_share():
    cfg = RewardConfig(contribution_weight=10.0, blending_share=0.5)
    blending = compute_rewards(_inputs(), cfg).attribution
    fossilized = compute_rewards(_inputs(fossilized=torch.tensor([[True, False], [False, False]])), cfg).attribution
    assert blending.tolist() == pytest.approx([0.1, -0.05])
    assert fossilized.tolist() == pytest.approx([0.2, -0.05])  # fossilizing the helpful seed pays more


def test_rent_charges_parameters_and_compute():
    cfg = RewardConfig(rent_weight=1.0, compute_rent_weight=0.5)
    terms = compute_rewards(_inputs(extra_compute=torch.tensor([0.0, 0.4])), cfg)
    assert terms.rent.tolist() == pytest.approx([0.0, 0.5 * math.log(2.0) + 0.5 * 0.4])


def test_rent_is_capped():
    terms = compute_rewards(_inputs(extra_params=torch.tensor([1e9, 1e9])), RewardConfig(rent_weight=1.0))
    assert terms.rent.tolist() == pytest.approx([1.5, 1.5])


def test_reward_normalizer_divides_by_running_std_and_clips():
    norm = RewardNormalizer(clip=3.0)
    norm.update(torch.tensor([1.0, -1.0, 1.0, -1.0]))
    assert norm.std == pytest.approx(1.0)
    assert norm(torch.tensor([0.5, 10.0])).tolist() == pytest.approx([0.5, 3.0])


def test_return_normalizer_learns_the_returns_and_round_trips():
    from trainer.simic.rollout import ReturnNormalizer

    norm = ReturnNormalizer()
    x = torch.tensor([[10.0, 12.0], [14.0, 16.0]])
    assert torch.equal(norm.normalize(x), x / 1.0)  # identity before it has seen anything
    norm.update(x)
    assert norm.mean == pytest.approx(13.0, rel=1e-3) and norm.std == pytest.approx(math.sqrt(5.0), rel=1e-3)
    assert norm.normalize(x).mean().item() == pytest.approx(0.0, abs=1e-3)
    assert torch.allclose(norm.denormalize(norm.normalize(x)), x)


def test_rollout_batch_reads_the_critic_in_return_units_and_targets_normalized_returns():
    from trainer.simic.rollout import ReturnNormalizer, RolloutBuffer

    norm = ReturnNormalizer()
    norm.update(torch.tensor([0.0, 10.0]))  # mean 5, std 5
    buf = RolloutBuffer(1, 2, obs_dim=3, n_slots=1, n_heads=8, device=torch.device("cpu"))
    buf.values[0] = torch.tensor([0.0, 1.0])  # the critic's raw outputs: 5 and 10 in return units
    buf.filled = 2
    batch = buf.batch(torch.tensor([[0.0, 10.0]]), gamma=1.0, lam=1.0, value_norm=norm)
    assert batch.values[0].tolist() == pytest.approx([5.0, 10.0], rel=1e-4)
    assert batch.returns[0].tolist() == pytest.approx([10.0, 10.0], rel=1e-4)  # GAE(λ=1) from those values
    assert batch.value_targets is not None
    assert torch.allclose(batch.value_targets, norm.normalize(batch.returns))
