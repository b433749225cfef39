"""The learning benchmark's controls (``bench/controls.py``): each is what its name says."""

from __future__ import annotations

import math
import pathlib

import pytest
import torch

from leyline.esper import SeedStage
from trainer.kasmina.host import HostConfig
from trainer.kasmina.lifecycle import LifecycleConfig
from trainer.simic.env import Env, EnvConfig
from trainer.simic.runtime import DeviceRuntime
from trainer.tamiyo.actions import Action
from trainer.tamiyo.masks import SlotView, compute_masks

ROOT = pathlib.Path(__file__).resolve().parents[3]


@pytest.fixture()
def controls(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import controls
    return controls


def _env(host: HostConfig | None = None) -> Env:
    cfg = EnvConfig(host=host or HostConfig(base_channels=4), slots=("r0c0", "r0c1"),
                    lifecycle=LifecycleConfig(), episode_length=4)
    return Env(0, 1, cfg, DeviceRuntime.create("cpu", "off", 1))


def test_a_widened_host_has_the_nearest_parameter_count_and_keeps_its_proportions(controls):
    base = HostConfig(base_channels=4)
    alone = controls.host_params(base)
    assert controls.widened(base, alone - 100).widths == (4, 8, 16)  # never narrower than the host
    for target in (int(alone * 1.1), int(alone * 1.3), int(alone * 2)):
        wide = controls.widened(base, target)
        count = controls.host_params(wide)
        assert abs(count - target) / target < 0.05, (target, count, wide.widths)
        ratios = [w / base.channels(i) for i, w in enumerate(wide.widths)]
        assert max(ratios) - min(ratios) <= 1 / 4 + 1e-9  # within one channel of the first block's step


def test_a_grafted_architecture_is_fossilized_at_full_alpha_from_the_first_epoch(controls):
    env = _env()
    controls.graft(env, ((1, "conv_heavy", "linear_add"),))
    slot = env.slots[1]
    assert slot.stage is SeedStage.FOSSILIZED and slot.alpha.alpha == 1.0 and slot.blueprint == "conv_heavy"
    assert controls.grown_arch(env) == ((1, "conv_heavy", "linear_add"),)
    assert env.model.extra_params() == slot.params > 0
    env.begin_epoch()
    assert slot.trainable and slot.slot_id in env.seed_opts  # it trains with the host


def test_training_flops_grow_with_a_seed_and_are_counted_once_per_architecture(controls):
    x, y = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))
    meter = controls.FlopMeter(x, y)
    env = _env()
    alone = meter.of(env)
    controls.graft(env, ((1, "conv_heavy", "linear_add"),))
    grown = meter.of(env)
    assert grown > alone > 0 and len(meter.per_image) == 2
    assert meter.of(env) == grown and len(meter.per_image) == 2
    wide = _env(controls.widened(HostConfig(base_channels=4), 2 * controls.host_params(HostConfig(base_channels=4))))
    assert meter.of(wide) > alone


def test_the_random_policy_only_takes_legal_actions(controls):
    policy = controls.RandomPolicy(0)
    stages = torch.tensor([[2, 0], [0, 0], [4, 6]])  # codes of some mixed slot stages
    view = SlotView(stages, torch.full((3, 2), 9), torch.zeros(3, 2, dtype=torch.bool))
    op_mask, slot_mask = compute_masks(view, 0)
    seen = set()
    for _ in range(200):
        for e, row in enumerate(policy.act([None] * 3, op_mask, slot_mask).tolist()):
            action = Action.from_row(row)
            assert op_mask[e, action.op] and slot_mask[e, action.op, action.slot]
            seen.add(action.op)
    assert len(seen) > 2


def test_intervals_use_the_sample_sd_and_the_t_distribution(controls):
    assert controls.t95(1) == 12.706 and controls.t95(30) == pytest.approx(2.042, abs=1e-3)
    assert controls.t95(100) == pytest.approx(1.984, abs=1e-3)
    ci = controls.Interval.of([1.0, 2.0, 3.0])
    assert ci.mean == 2.0 and ci.sd == 1.0 and ci.half == pytest.approx(4.303 / math.sqrt(3))
    a, b = {1: 0.5, 2: 0.7, 3: 0.9}, {1: 0.4, 2: 0.7, 4: 0.0}
    assert controls.paired(a, b, float).mean == pytest.approx(0.05) and controls.paired(a, b, float).n == 2
