"""The lifecycle graph: every legal transition is allowed, every other one raises."""

import itertools

import pytest
import torch

from leyline.esper import SeedStage
from trainer.kasmina.lifecycle import (
    LEGAL_TRANSITIONS,
    GradStats,
    IllegalTransition,
    LifecycleConfig,
    check_transition,
    gate_g2,
    gate_g3,
    gate_g5,
)
from trainer.kasmina.slot import SeedSlot

S = SeedStage
EXPECTED_LEGAL = {
    (S.DORMANT, S.GERMINATED),
    (S.GERMINATED, S.TRAINING), (S.GERMINATED, S.PRUNED),
    (S.TRAINING, S.BLENDING), (S.TRAINING, S.PRUNED),
    (S.BLENDING, S.HOLDING), (S.BLENDING, S.PRUNED),
    (S.HOLDING, S.FOSSILIZED), (S.HOLDING, S.BLENDING), (S.HOLDING, S.PRUNED),
    (S.PRUNED, S.EMBARGOED), (S.EMBARGOED, S.RESETTING), (S.RESETTING, S.DORMANT),
}
ALL_PAIRS = list(itertools.product(SeedStage, SeedStage))


def test_the_table_is_the_spec():
    table = {(src, dst) for src, dsts in LEGAL_TRANSITIONS.items() for dst in dsts}
    assert table == EXPECTED_LEGAL
    assert set(LEGAL_TRANSITIONS) == set(SeedStage)


@pytest.mark.parametrize(("src", "dst"), sorted(EXPECTED_LEGAL, key=str))
def test_legal_transition_passes(src, dst):
    check_transition(src, dst)


@pytest.mark.parametrize(("src", "dst"), [p for p in ALL_PAIRS if p not in EXPECTED_LEGAL], ids=str)
def test_illegal_transition_raises(src, dst):
    with pytest.raises(IllegalTransition, match=f"{src.value} → {dst.value}"):
        check_transition(src, dst)


def test_fossilized_is_terminal():
    for dst in SeedStage:
        with pytest.raises(IllegalTransition):
            check_transition(S.FOSSILIZED, dst)


CFG = LifecycleConfig(min_training_epochs=2, embargo_epochs=2, min_prune_age=1)


def _slot() -> SeedSlot:
    return SeedSlot("r0c0", 8, CFG)


def _healthy(slot: SeedSlot) -> None:
    slot.grads = GradStats(ratio_ema=1.0, health=1.0, norm=0.1, measurements=3)


def test_slot_walks_the_happy_path_to_fossilized():
    slot = _slot()
    slot.germinate("conv_light", "linear_add", 3, "s1", torch.device("cpu"))
    assert slot.stage is S.GERMINATED
    slot.begin_epoch()  # G1 is automatic
    assert slot.stage is S.TRAINING
    ok, _ = slot.advance()
    assert not ok and slot.stage is S.TRAINING  # G2: too few epochs
    slot.end_epoch()
    slot.end_epoch()
    ok, events = slot.advance()
    assert not ok and "not measured" in events[0].reason
    _healthy(slot)
    ok, _ = slot.advance()
    assert ok and slot.stage is S.BLENDING
    for expected in (1 / 3, 2 / 3, 1.0):
        ok, _ = slot.advance()
        assert not ok  # G3 waits for alpha 1.0
        slot.begin_epoch()
        assert slot.alpha.alpha == pytest.approx(expected)
    ok, _ = slot.advance()
    assert ok and slot.stage is S.HOLDING
    ok, events = slot.fossilize()
    assert not ok and "not measured" in events[0].reason  # G5
    slot.observe_contribution(0.02)
    ok, _ = slot.fossilize()
    assert ok and slot.stage is S.FOSSILIZED
    with pytest.raises(ValueError):
        slot.prune(0, "linear", "too late")


def test_prune_embargo_reset_returns_to_dormant():
    slot = _slot()
    slot.germinate("norm", "gated", 3, "s1", torch.device("cpu"))
    slot.begin_epoch()
    events = slot.prune(0, "linear", "test")
    assert slot.stage is S.PRUNED and slot.seed is None and events[0].to_stage is S.PRUNED
    stages = []
    for _ in range(6):
        slot.begin_epoch()
        slot.end_epoch()
        stages.append(slot.stage)
    assert stages[:5] == [S.EMBARGOED, S.EMBARGOED, S.RESETTING, S.DORMANT, S.DORMANT]
    slot.germinate("norm", "linear_add", 3, "s2", torch.device("cpu"))
    assert slot.stage is S.GERMINATED


def test_scheduled_prune_ramps_alpha_down_with_the_seed_frozen():
    slot = _slot()
    slot.germinate("conv_small", "linear_add", 3, "s1", torch.device("cpu"))
    slot.begin_epoch()
    _healthy(slot)
    slot.end_epoch()
    slot.end_epoch()
    assert slot.advance()[0]
    for _ in range(3):
        slot.begin_epoch()
    assert slot.advance()[0] and slot.stage is S.HOLDING
    slot.prune(2, "linear", "ramp")
    assert slot.pruning and slot.stage is S.HOLDING and not slot.trainable
    assert all(not p.requires_grad for p in slot.seed.parameters())
    slot.begin_epoch()
    assert slot.alpha.alpha == pytest.approx(0.5) and slot.stage is S.HOLDING
    events = slot.begin_epoch()
    assert slot.stage is S.PRUNED and events[0].reason == "scheduled prune finished"


def test_holding_seed_retargeted_goes_back_to_blending():
    slot = _slot()
    slot.germinate("attention", "linear_add", 3, "s1", torch.device("cpu"))
    slot.begin_epoch()
    _healthy(slot)
    slot.end_epoch()
    slot.end_epoch()
    slot.advance()
    for _ in range(3):
        slot.begin_epoch()
    slot.advance()
    assert slot.stage is S.HOLDING
    events = slot.set_alpha_target(0.5, 3, "cosine")
    assert slot.stage is S.BLENDING and events[0].from_stage is S.HOLDING


def test_lifecycle_ops_refuse_the_wrong_stage():
    slot = _slot()
    with pytest.raises(ValueError):
        slot.advance()
    with pytest.raises(ValueError):
        slot.prune(0, "linear", "empty")
    with pytest.raises(ValueError):
        slot.set_alpha_target(1.0, 0, "linear")
    slot.germinate("norm", "linear_add", 3, "s1", torch.device("cpu"))
    with pytest.raises(IllegalTransition):
        slot.germinate("norm", "linear_add", 3, "s2", torch.device("cpu"))


def test_gate_g2_conditions():
    good = GradStats(ratio_ema=1.0, health=0.9, norm=0.1, measurements=2)
    assert gate_g2(S.TRAINING, 2, good, CFG).passed
    assert not gate_g2(S.TRAINING, 1, good, CFG).passed
    assert not gate_g2(S.BLENDING, 5, good, CFG).passed
    assert not gate_g2(S.TRAINING, 5, GradStats(), CFG).passed
    assert not gate_g2(S.TRAINING, 5, GradStats(health=0.9, measurements=2, exploding=True), CFG).passed
    assert not gate_g2(S.TRAINING, 5, GradStats(health=0.5, measurements=2), CFG).passed


def test_gates_g3_g5():
    assert gate_g3(S.BLENDING, 1.0, True).passed
    assert not gate_g3(S.BLENDING, 1.0, False).passed
    assert not gate_g3(S.BLENDING, 0.7, True).passed
    assert gate_g5(S.HOLDING, -0.01).passed  # measured is what G5 asks; the policy judges the sign
    assert not gate_g5(S.HOLDING, None).passed
    assert not gate_g5(S.BLENDING, 0.1).passed


def test_gradient_ratio_ema_and_health():
    slot = _slot()
    slot.germinate("conv_light", "linear_add", 3, "s1", torch.device("cpu"))
    host_params = slot.params * 4
    slot.record_grad_norms(torch.tensor(2.0), torch.tensor(1.0), host_params)
    values = slot.grad_buf.tolist()
    assert values[0] == pytest.approx(0.5 * 2.0)  # (1/2)·sqrt(4)
    assert values[1] == 1.0 and values[4] == 1
    slot.record_grad_norms(torch.tensor(1e-9), torch.tensor(1.0), host_params)  # ratio explodes: clamped
    ema, health, _, raw, count = slot.grad_buf.tolist()
    assert ema == pytest.approx(0.9 * 1.0 + 0.1 * 10.0)
    assert health == pytest.approx(0.9) and count == 2
    slot.absorb_grad_stats(slot.grad_buf.tolist())
    assert slot.grads.exploding and slot.grads.measurements == 2
