"""Host routing, the blueprint catalogue, blending, and straight-through isolation."""

import pytest
import torch
import torch.nn.functional as F

from leyline.esper import SeedStage
from trainer.kasmina.alpha import ALPHA_CURVES, AlphaController, curve_value
from trainer.kasmina.blueprints import BLUEPRINT_NAMES, build_blueprint
from trainer.kasmina.host import CNNHost, HostConfig
from trainer.kasmina.lifecycle import LifecycleConfig
from trainer.kasmina.model import MorphogeneticModel
from trainer.kasmina.slot import BLEND_STYLES

CFG = HostConfig(n_blocks=3, base_channels=4)
SLOTS = ("r0c0", "r0c1", "r0c2")


def _model(seed: int = 0) -> MorphogeneticModel:
    torch.manual_seed(seed)
    return MorphogeneticModel(CNNHost(CFG), SLOTS, LifecycleConfig())


def test_forward_to_and_from_compose_to_the_plain_forward():
    torch.manual_seed(0)
    host = CNNHost(CFG).eval()
    x = torch.randn(2, 3, 32, 32)
    h0 = host.forward_to(x, "r0c0")
    h1 = host.forward_to(h0, "r0c2", from_slot="r0c0")
    assert h1.shape == (2, 16, 4, 4)
    assert torch.allclose(host.forward_from(h1, "r0c2"), host(x))
    assert torch.allclose(host.forward_from(h0, "r0c0"), host(x))


@pytest.mark.parametrize("name", BLUEPRINT_NAMES)
def test_every_blueprint_keeps_the_shape_and_starts_as_identity(name):
    module = build_blueprint(name, 8)
    x = torch.randn(2, 8, 6, 6)
    assert module(x).shape == x.shape
    assert torch.allclose(module(x), x, atol=1e-6)


def test_unknown_blueprint_is_an_error():
    with pytest.raises(ValueError, match="unknown blueprint"):
        build_blueprint("transformer", 8)


@pytest.mark.parametrize("style", BLEND_STYLES)
def test_alpha_zero_is_the_host_and_alpha_changes_the_output(style):
    model = _model().eval()
    x = torch.randn(2, 3, 32, 32)
    reference = model(x)
    slot = model.slot("r0c1")
    slot.germinate("conv_light", style, 3, "s", torch.device("cpu"))
    slot.stage = SeedStage.BLENDING  # direct set: this test is about the forward only
    assert torch.allclose(model(x), reference)
    slot.alpha.alpha = 0.8
    for p in slot.seed.parameters():  # move the seed away from its identity start
        torch.nn.init.normal_(p, std=0.5)
    assert not torch.allclose(model(x), reference)
    on, off = model.forward_counterfactual(x, [1])  # r0c1 is slot 1 in network order
    assert torch.allclose(on, model(x), atol=1e-6) and torch.allclose(off, reference, atol=1e-6)


def test_counterfactual_forward_matches_each_configuration_run_alone():
    import copy

    model = _model(2).eval()
    x = torch.randn(5, 3, 32, 32)
    for i, (slot_id, style) in enumerate(zip(SLOTS, ("linear_add", "gated", "sigmoid_add"), strict=True)):
        slot = model.slot(slot_id)
        slot.germinate(BLUEPRINT_NAMES[i], style, 3, slot_id, torch.device("cpu"))
        slot.stage = SeedStage.BLENDING
        slot.alpha.alpha = 0.6
        for p in slot.seed.parameters():
            torch.nn.init.normal_(p, std=0.3)
    for ablate in ([], [1], [0, 2], [0, 1, 2]):
        fused = model.forward_counterfactual(x, ablate)
        assert fused.shape == (1 + len(ablate), 5, 10)
        assert torch.allclose(fused[0], model(x), atol=1e-5)
        for k, index in enumerate(ablate, start=1):
            alone = copy.deepcopy(model)
            alone.slots[index].seed = None  # that slot's seed out: the host's features pass
            assert torch.allclose(fused[k], alone(x), atol=1e-5), (ablate, index)


def test_straight_through_leaves_host_gradients_identical():
    x, y = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))
    plain, seeded = _model(1), _model(1)
    for slot_id in ("r0c0", "r0c2"):
        slot = seeded.slot(slot_id)
        slot.germinate("conv_heavy", "linear_add", 3, slot_id, torch.device("cpu"))
        for p in slot.seed.parameters():  # not the identity start: the seed really computes
            torch.nn.init.normal_(p, std=0.5)
        slot.begin_epoch()
        assert slot.stage is SeedStage.TRAINING
    out_plain, out_seeded = plain(x), seeded(x)
    assert torch.equal(out_plain, out_seeded)  # the forward value is the host's
    F.cross_entropy(out_plain, y).backward()
    F.cross_entropy(out_seeded, y).backward()
    for (name, p), q in zip(plain.host.named_parameters(), seeded.host.parameters(), strict=True):
        assert torch.equal(p.grad, q.grad), name
    seed_grads = [p.grad for p in seeded.slot("r0c0").seed.parameters()]
    assert all(g is not None for g in seed_grads) and any(g.abs().sum() > 0 for g in seed_grads)


@pytest.mark.parametrize("name", BLUEPRINT_NAMES)
def test_isolated_seed_trains_in_channels_last(name):
    """Every blueprint in TRAINING (isolated input) runs backward in the hosts' channels-last layout."""
    model = _model(2).to(memory_format=torch.channels_last)
    slot = model.slot("r0c1")
    slot.germinate(name, "gated", 3, "s", torch.device("cpu"))
    slot.begin_epoch()
    x = torch.randn(4, 3, 32, 32).contiguous(memory_format=torch.channels_last)
    F.cross_entropy(model(x), torch.randint(0, 10, (4,))).backward()
    assert all(p.grad is not None for p in slot.seed.body.parameters())


def test_blending_does_change_host_gradients():
    """The control: without isolation the same seed alters the host's gradients."""
    x, y = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))
    plain, seeded = _model(1), _model(1)
    slot = seeded.slot("r0c0")
    slot.germinate("conv_heavy", "linear_add", 3, "s", torch.device("cpu"))
    slot.stage, slot.alpha.alpha = SeedStage.BLENDING, 0.5
    for p in slot.seed.parameters():  # a seed that has learned something
        torch.nn.init.normal_(p, std=0.5)
    F.cross_entropy(plain(x), y).backward()
    F.cross_entropy(seeded(x), y).backward()
    assert not torch.equal(plain.host.blocks[0].conv.weight.grad, seeded.host.blocks[0].conv.weight.grad)


@pytest.mark.parametrize("curve", ALPHA_CURVES)
def test_curves_go_from_zero_to_one_monotonically(curve):
    values = [curve_value(curve, i / 10) for i in range(11)]
    assert values[0] == pytest.approx(0.0, abs=1e-9) and values[-1] == pytest.approx(1.0)
    assert all(b >= a for a, b in zip(values, values[1:], strict=False))


def test_alpha_controller_up_hold_down():
    ctl = AlphaController()
    ctl.retarget(1.0, 4, "linear")
    assert [round(ctl.tick(), 3) for _ in range(5)] == [0.25, 0.5, 0.75, 1.0, 1.0]
    assert ctl.holding
    ctl.retarget(0.5, 0, "cosine")
    assert ctl.alpha == 0.5 and ctl.holding
    ctl.retarget(0.0, 2, "sigmoid")
    ctl.tick()
    assert 0.0 < ctl.alpha < 0.5 and not ctl.holding
    with pytest.raises(ValueError):
        ctl.retarget(1.5, 2)
