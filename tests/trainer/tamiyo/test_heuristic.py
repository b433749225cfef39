"""Heuristic Tamiyo responds to the run: plateaus, contributions against their noise, what each blueprint brought."""

import math

import torch

from leyline.esper import SeedStage
from trainer.kasmina.lifecycle import STAGE_CODE, LifecycleConfig
from trainer.kasmina.slot import SeedSlot
from trainer.tamiyo.actions import Action, Op
from trainer.tamiyo.heuristic import BlueprintRecord, HeuristicConfig, HeuristicPolicy
from trainer.tamiyo.masks import SlotView, compute_masks

S = SeedStage
LIFECYCLE = LifecycleConfig(min_training_epochs=2, min_prune_age=0)


class _Env:
    def __init__(self, slots, accs, episode_length=12, host_size=4000):
        self.slots, self.host_size = slots, host_size
        self.epoch_in_episode, self.episode_length = len(accs), episode_length
        self.val_loss, self.val_acc = 1.0, accs[-1] if accs else 0.0
        self.loss_history, self.acc_history = [1.0] * len(accs), accs
        self.last_action_ok, self.last_op = True, 0


def _slots():
    return [SeedSlot(s, 8, LIFECYCLE) for s in ("r0c0", "r0c1")]


def _act(policy, env) -> Action:
    view = SlotView(torch.tensor([[STAGE_CODE[s.stage] for s in env.slots]]),
                    torch.tensor([[s.age for s in env.slots]]), torch.zeros(1, len(env.slots), dtype=torch.bool))
    return Action.from_row(policy.act([env], *compute_masks(view, 0))[0].tolist())


def test_it_germinates_on_a_plateau_not_while_the_host_improves():
    policy = HeuristicPolicy(HeuristicConfig(), LIFECYCLE)
    assert _act(policy, _Env(_slots(), [0.3, 0.5])).op is Op.WAIT  # still climbing
    assert _act(policy, _Env(_slots(), [0.3, 0.5, 0.6])).op is Op.WAIT
    action = _act(policy, _Env(_slots(), [0.3, 0.5, 0.6, 0.55]))  # no better than the best: a plateau
    assert action.op is Op.GERMINATE and action.blueprint == "conv_light"


def test_it_germinates_at_the_last_epoch_that_leaves_a_seed_its_time_and_never_later():
    policy = HeuristicPolicy(HeuristicConfig(), LIFECYCLE)
    climbing = [0.1 * i for i in range(1, 12)]
    lead = LIFECYCLE.min_training_epochs + HeuristicConfig().tempo + 2
    last = 11 - lead
    assert _act(policy, _Env(_slots(), climbing[: last - 1])).op is Op.WAIT
    assert _act(policy, _Env(_slots(), climbing[:last])).op is Op.GERMINATE
    flat = [0.5] * (last + 1)  # a plateau, but too late for a seed to be judged
    assert _act(policy, _Env(_slots(), flat)).op is Op.WAIT


def _holding(contribution, prev, epochs_in_stage=0):
    slots = _slots()
    slot = slots[0]
    slot.germinate("conv_light", "linear_add", 3, "s", torch.device("cpu"))
    slot.stage, slot.contribution, slot.prev_contribution = S.HOLDING, contribution, prev
    slot.epochs_in_stage, slot.age = epochs_in_stage, 6
    return slots


def test_it_fossilizes_only_a_contribution_that_clears_its_noise_twice():
    policy = HeuristicPolicy(HeuristicConfig(validation_images=256), LIFECYCLE)
    noise = math.sqrt(0.01 / 256)
    assert 0.01 < 2 * noise  # one accuracy point on 256 images is within the noise
    assert _act(policy, _Env(_holding(0.01, 0.012), [0.5] * 6)).op is Op.WAIT
    assert _act(policy, _Env(_holding(0.05, 0.0), [0.5] * 6)).op is Op.WAIT  # one good reading
    assert _act(policy, _Env(_holding(0.05, 0.04), [0.5] * 6)).op is Op.FOSSILIZE
    many = HeuristicPolicy(HeuristicConfig(validation_images=10_000), LIFECYCLE)
    assert _act(many, _Env(_holding(0.01, 0.012), [0.5] * 6)).op is Op.FOSSILIZE  # more images, less noise


def test_it_prunes_a_seed_that_hurts_or_stays_unproven():
    policy = HeuristicPolicy(HeuristicConfig(hold_epochs=2), LIFECYCLE)
    assert _act(policy, _Env(_holding(-0.1, 0.0), [0.5] * 6)).op is Op.WAIT  # one bad reading
    assert _act(policy, _Env(_holding(-0.1, -0.08), [0.5] * 6)).op is Op.PRUNE
    assert _act(policy, _Env(_holding(0.005, 0.0, epochs_in_stage=1), [0.5] * 6)).op is Op.WAIT
    assert _act(policy, _Env(_holding(0.005, 0.0, epochs_in_stage=2), [0.5] * 6)).op is Op.PRUNE


def test_blueprints_are_tried_once_then_chosen_by_what_they_brought():
    config = HeuristicConfig(blueprints=("conv_light", "attention"), explore=0.0)
    policy = HeuristicPolicy(config, LIFECYCLE)
    tried = []
    for outcome in (0.01, 0.08, 0.00, 0.02):  # conv_light@0, conv_light@1, attention@0, attention@1
        slot, blueprint = policy.choose([0, 1])
        tried.append((slot, blueprint))
        policy.records.setdefault((slot, blueprint), BlueprintRecord()).outcomes.append(outcome)
    assert tried == [(0, "conv_light"), (1, "conv_light"), (0, "attention"), (1, "attention")]
    assert policy.choose([0, 1]) == (1, "conv_light")  # the one that helped most
    assert policy.choose([0]) == (0, "conv_light")


def test_a_judged_seed_is_recorded_with_its_parameter_rent_and_survives_a_checkpoint():
    policy = HeuristicPolicy(HeuristicConfig(rent_per_pct=0.001), LIFECYCLE)
    slots = _holding(0.05, 0.04)
    assert _act(policy, _Env(slots, [0.5] * 6, host_size=slots[0].params * 10)).op is Op.FOSSILIZE
    [(key, record)] = policy.records.items()
    assert key == (0, "conv_light") and record.outcomes == [0.05 - 0.001 * 10]  # a 10% seed pays 1 pp
    restored = HeuristicPolicy(HeuristicConfig(), LIFECYCLE)
    restored.load_state_dict(policy.state_dict())
    assert restored.records == policy.records
