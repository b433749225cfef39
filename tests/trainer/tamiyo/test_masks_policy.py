"""Action masks, op-first masked sampling with causal heads and features."""

import torch

from leyline.esper import HEAD_NAMES, SeedStage
from trainer.kasmina.lifecycle import STAGE_CODE, LifecycleConfig
from trainer.kasmina.slot import SeedSlot
from trainer.tamiyo.actions import CAUSAL_HEADS, Op, head_sizes
from trainer.tamiyo.features import BASE_FEATURES, NEVER, SLOT_FEATURES, build_observations, obs_dim
from trainer.tamiyo.masks import SlotView, compute_masks
from trainer.tamiyo.policy import ActorCritic, PolicyConfig

S = SeedStage


def _view(rows, ages=None, pruning=None):
    stage = torch.tensor([[STAGE_CODE[s] for s in row] for row in rows])
    age = torch.tensor(ages) if ages is not None else torch.full(stage.shape, 10)
    prun = torch.tensor(pruning) if pruning is not None else torch.zeros(stage.shape, dtype=torch.bool)
    return SlotView(stage, age, prun)


def test_empty_env_may_only_wait_or_germinate():
    op, slot = compute_masks(_view([[S.DORMANT, S.DORMANT]]), min_prune_age=5)
    assert op[0].tolist() == [True, True, False, False, False, False]
    assert slot[0, Op.GERMINATE].tolist() == [True, True]


def test_incubating_seed_blocks_germination_everywhere():
    for busy in (S.GERMINATED, S.TRAINING, S.PRUNED, S.EMBARGOED, S.RESETTING):
        op, _ = compute_masks(_view([[busy, S.DORMANT]]), min_prune_age=0)
        assert not op[0, Op.GERMINATE], busy


def test_masks_per_stage():
    rows = [[S.TRAINING, S.HOLDING, S.FOSSILIZED]]
    op, slot = compute_masks(_view(rows, ages=[[2, 9, 9]]), min_prune_age=5)
    assert op[0, Op.WAIT] and not op[0, Op.GERMINATE]
    assert slot[0, Op.ADVANCE].tolist() == [True, False, False]
    assert slot[0, Op.FOSSILIZE].tolist() == [False, True, False]
    assert slot[0, Op.PRUNE].tolist() == [False, True, False]  # the TRAINING seed is too young
    assert slot[0, Op.SET_ALPHA_TARGET].tolist() == [False, True, False]
    op, _ = compute_masks(_view([[S.BLENDING, S.DORMANT]], pruning=[[True, False]]), min_prune_age=0)
    assert op[0].tolist() == [True, True, False, False, False, False]  # the seed being pruned is left alone


def test_causal_table():
    used = {Op(o): {HEAD_NAMES[h] for h in range(len(HEAD_NAMES)) if CAUSAL_HEADS[o, h]} for o in range(6)}
    assert used[Op.WAIT] == {"op"}
    assert used[Op.GERMINATE] == {"op", "slot", "blueprint", "style", "tempo"}
    assert used[Op.FOSSILIZE] == {"op", "slot"}


def _policy(n_slots=3):
    torch.manual_seed(0)
    return ActorCritic(PolicyConfig(obs_dim(n_slots), n_slots, hidden=16))


def test_sampling_respects_masks_and_zeroes_unused_heads():
    policy = _policy()
    n = 256
    obs = torch.randn(n, obs_dim(3))
    op_mask = torch.zeros(n, 6, dtype=torch.bool)
    op_mask[:, [Op.WAIT, Op.ADVANCE, Op.GERMINATE]] = True
    slot_mask = torch.zeros(n, 6, 3, dtype=torch.bool)
    slot_mask[:, Op.WAIT] = True
    slot_mask[:, Op.ADVANCE, 2] = True
    slot_mask[:, Op.GERMINATE, :2] = True
    gen = torch.Generator().manual_seed(1)
    out = policy.act(obs, policy.initial_state(n), op_mask, slot_mask, gen)
    ops = out.actions[:, 0]
    assert set(ops.tolist()) == {Op.WAIT, Op.ADVANCE, Op.GERMINATE}
    assert (out.actions[ops == Op.ADVANCE, 1] == 2).all()
    assert (out.actions[ops == Op.GERMINATE, 1] < 2).all()
    unused = ~CAUSAL_HEADS[ops]
    assert (out.actions[unused] == 0).all() and (out.log_probs[unused] == 0).all()
    assert (out.log_probs[~unused] <= 0).all() and out.value.shape == (n,)


def test_evaluate_reproduces_the_sampled_log_probs():
    policy = _policy()
    n = 4
    obs = torch.randn(n, 3, obs_dim(3))
    op_mask = torch.ones(n, 3, 6, dtype=torch.bool)
    slot_mask = torch.ones(n, 3, 6, 3, dtype=torch.bool)
    state = policy.initial_state(n)
    actions, log_probs = [], []
    for t in range(3):
        out = policy.act(obs[:, t], state, op_mask[:, t], slot_mask[:, t])
        state = out.state
        actions.append(out.actions)
        log_probs.append(out.log_probs)
    lp, ent, values = policy.evaluate(obs, op_mask, slot_mask, torch.stack(actions, 1), policy.initial_state(n))
    assert torch.allclose(lp, torch.stack(log_probs, 1), atol=1e-5)
    assert values.shape == (n, 3) and (ent >= 0).all()
    assert len(head_sizes(3)) == len(HEAD_NAMES)


class _Env:
    def __init__(self, slots, accs):
        self.slots = slots
        self.epoch_in_episode, self.episode_length = len(accs), 10
        self.val_loss, self.val_acc = 1.0, accs[-1] if accs else 0.0
        self.loss_history, self.acc_history = [1.0] * len(accs), accs
        self.last_action_ok, self.last_op = True, 0


def _slots():
    return [SeedSlot(s, 8, LifecycleConfig(min_training_epochs=1)) for s in ("r0c0", "r0c1")]


def test_features_shape_and_never_measured():
    obs = build_observations([_Env(_slots(), [0.2]), _Env(_slots(), [])])
    assert obs.shape == (2, BASE_FEATURES + 2 * SLOT_FEATURES) == (2, obs_dim(2))
    base = obs[1, :BASE_FEATURES]
    assert (base[3:13] == NEVER).all()  # no loss/accuracy history yet
    slot0 = obs[0, BASE_FEATURES: BASE_FEATURES + SLOT_FEATURES]
    assert slot0[0] == 0.0 and slot0[1 + STAGE_CODE[S.DORMANT]] == 1.0
    assert slot0[11] == NEVER  # contribution never measured


def test_decision_entropy_is_normalised_by_the_legal_choices():
    from trainer.tamiyo.policy import normalized_entropy

    uniform = [torch.log_softmax(torch.zeros(2, 4), -1), torch.log_softmax(torch.zeros(2, 3), -1)]
    legal = torch.tensor([[True, True, False, False], [True, True, True, True]])
    masked = [torch.log_softmax(torch.zeros(2, 4).masked_fill(~legal, -1e9), -1), uniform[1]]
    assert normalized_entropy(masked, [legal]).tolist() == [1.0, 1.0]  # uniform over what is legal
    sharp = [torch.log_softmax(torch.tensor([[50.0, 0.0, 0.0, 0.0]] * 2), -1),
             torch.log_softmax(torch.tensor([[50.0, 0.0, 0.0]] * 2), -1)]
    assert normalized_entropy(sharp, [torch.ones(2, 4, dtype=torch.bool)]).max() < 1e-6
    only_one = torch.tensor([[True, False, False, False]] * 2)  # no choice: that head is left out
    assert normalized_entropy([masked[0], uniform[1]], [only_one]).tolist() == [1.0, 1.0]


def test_acting_reports_value_and_entropy_with_the_actions():
    torch.manual_seed(0)
    policy = ActorCritic(PolicyConfig(obs_dim(2), 2, hidden=16))
    op_mask = torch.ones(3, 6, dtype=torch.bool)
    out = policy.act(torch.randn(3, obs_dim(2)), policy.initial_state(3), op_mask,
                     torch.ones(3, 6, 2, dtype=torch.bool))
    assert out.entropy is not None and out.entropy.shape == (3,)
    assert bool(((out.entropy > 0.5) & (out.entropy <= 1)).all())
