"""Each per-epoch check fires on its fault, stays silent on a noisy but healthy history, reports once."""

from __future__ import annotations

import math
import random

import pytest

from trainer.simic.sites import EpochSignals, PolicySignals
from trainer.telemetry.anomaly import AnomalyDetector
from trainer.telemetry.epoch_checks import EpochCheckConfig, EpochChecks
from trainer.telemetry.gradients import GradientStats

T = 8  # epochs per round in these histories


def _grad(scope: str, norm: float, nonfinite: int = 0) -> GradientStats:
    return GradientStats(scope=scope, global_norm=math.nan if nonfinite else norm, max_tensor_norm=norm,
                         n_tensors=4, n_params=100, nonfinite=nonfinite, vanishing=norm < 1e-7, exploding=False)


def _signals(round_: int, epoch: int, acc=(0.5, 0.5), loss=(1.0, 1.0), policy: PolicySignals | None = None):
    return EpochSignals(round_, epoch, tuple(acc), tuple(loss), tuple(loss), policy)


def _policy(values=(0.1, -0.2), entropy=(0.9, 0.85)) -> PolicySignals:
    return PolicySignals(tuple(values), tuple(entropy))


def _healthy_epoch(rng: random.Random, round_: int, epoch: int) -> tuple[EpochSignals, list]:
    """Noisy, healthy-looking numbers: gradients ±60%, accuracy rising with one-epoch dips of 40%."""
    acc = [min(0.9, 0.2 + 0.08 * epoch) * (0.6 if rng.random() < 0.15 else 1.0) for _ in range(2)]
    loss = [2.3 * 0.85 ** epoch * rng.uniform(0.9, 1.1) for _ in range(2)]
    policy = _policy([rng.gauss(0, 1) for _ in range(2)], [rng.uniform(0.6, 0.95) for _ in range(2)])
    grads = [(env, _grad(scope, rng.uniform(0.4, 1.6))) for env in range(2) for scope in ("host", "r0c0")]
    return _signals(round_, epoch, acc, loss, policy), grads


def _kinds(found) -> list[tuple[str, int | None]]:
    return [(f.anomaly, env) for env, f in found]


def _warm(checks: EpochChecks, rounds: int = 2, seed: int = 0) -> None:
    rng = random.Random(seed)
    for r in range(1, rounds + 1):
        for e in range(1, T + 1):
            signals, grads = _healthy_epoch(rng, r, e)
            assert checks.run(signals, grads) == [], (r, e)


def test_a_noisy_healthy_history_raises_nothing():
    checks = EpochChecks()
    _warm(checks, rounds=12, seed=3)


def test_nan_gradients_fire_once_and_rearm():
    checks = EpochChecks()
    _warm(checks)
    found = checks.run(_signals(3, 1), [(0, _grad("r0c0", 1.0, nonfinite=2))])
    assert _kinds(found) == [("nan_inf", 0)] and "r0c0" in found[0][1].detail
    assert found[0][1].evidence["nonfinite_grad_tensors"] == 2
    assert checks.run(_signals(3, 2), [(0, _grad("r0c0", 1.0, nonfinite=2))]) == []  # still broken: one event
    assert checks.run(_signals(3, 3), [(0, _grad("r0c0", 1.0))]) == []
    assert _kinds(checks.run(_signals(3, 4), [(0, _grad("r0c0", 1.0, nonfinite=1))])) == [("nan_inf", 0)]


def test_non_finite_losses_are_nan_inf():
    checks = EpochChecks()
    found = checks.run(_signals(1, 1, loss=(1.0, math.inf)), [])
    assert _kinds(found) == [("nan_inf", 1)] and "val_loss" in found[0][1].detail


def test_gradient_explosion_against_the_scopes_own_median():
    checks = EpochChecks()
    _warm(checks)
    assert checks.run(_signals(3, 1), [(1, _grad("host", 5.0))]) == []  # 5× a median near 1: not yet
    found = checks.run(_signals(3, 2), [(1, _grad("host", 30.0))])
    assert _kinds(found) == [("gradient_explosion", 1)] and found[0][1].evidence["norm"] == 30.0


def test_a_dead_seed_is_zero_or_a_sliver_of_its_own_median():
    checks = EpochChecks()
    assert _kinds(checks.run(None, [(0, _grad("r0c1", 0.0))])) == [("dead_seed", 0)]  # no history needed for 0
    _warm(checks)
    assert _kinds(checks.run(None, [(1, _grad("r0c0", 1e-5))])) == [("dead_seed", 1)]
    assert checks.run(None, [(1, _grad("host", 1e-5))]) == []  # the host is no seed
    checks.forget_scope(0, "r0c0")  # a new seed: its history starts over, a small norm is no verdict
    assert checks.run(None, [(0, _grad("r0c0", 1e-5))]) == []


def test_loss_spike_against_the_highest_loss_of_the_round():
    checks = EpochChecks()
    _warm(checks)
    assert checks.run(_signals(3, 1, loss=(2.3, 2.3)), []) == []
    assert checks.run(_signals(3, 2, loss=(3.0, 2.0)), []) == []  # under 3× the round's highest
    found = checks.run(_signals(3, 3, loss=(19.0, 2.0)), [])
    assert _kinds(found) == [("loss_spike", 0)] and "19" in found[0][1].detail


def test_loss_drift_against_the_same_epoch_of_earlier_rounds_for_two_epochs():
    checks = EpochChecks()
    _warm(checks)  # the reference: 2.3 · 0.85^epoch, ±10%
    for e in range(1, 5):
        assert checks.run(_signals(3, e, loss=(2.3 * 0.85**e,) * 2), []) == []
    reference = [2.3 * 0.85**e for e in (5, 6, 7)]
    assert checks.run(_signals(3, 5, loss=(3 * reference[0], reference[0])), []) == []  # one epoch is no verdict
    found = checks.run(_signals(3, 6, loss=(3 * reference[1], reference[1])), [])
    assert _kinds(found) == [("loss_drift", 0)] and 2.5 < found[0][1].evidence["ratio"] < 3.5
    assert checks.run(_signals(3, 7, loss=(3 * reference[2], reference[2])), []) == []  # still high: one event
    restored = EpochChecks()
    restored.load_state_dict(checks.state_dict())
    assert restored.state_dict() == checks.state_dict()


def test_host_gradient_drift_against_the_same_epoch_of_earlier_rounds():
    checks = EpochChecks()
    for e in range(1, T + 1):
        checks.run(_signals(1, e), [(0, _grad("host", 1.0 + e / 10))])
    assert checks.run(_signals(2, 1), [(0, _grad("host", 1.1))]) == []
    assert checks.run(_signals(2, 2), [(0, _grad("host", 6.0))]) == []  # one epoch off is not a drift
    assert checks.run(_signals(2, 3), [(0, _grad("host", 1.3))]) == []
    assert checks.run(_signals(2, 4), [(0, _grad("host", 7.0))]) == []
    found = checks.run(_signals(2, 5), [(0, _grad("host", 9.0))])
    assert _kinds(found) == [("gradient_drift", 0)] and found[0][1].evidence["ratio"] > 4


def test_performance_degradation_needs_a_fall_that_lasts():
    checks = EpochChecks()
    for e, acc in enumerate([0.2, 0.4, 0.6, 0.7, 0.35, 0.72, 0.3], start=1):
        assert checks.run(_signals(1, e, acc=(acc, 0.5)), []) == [], e  # one-epoch dips pass
    found = checks.run(_signals(1, 8, acc=(0.2, 0.5)), [])
    assert _kinds(found) == [("performance_degradation", 0)]
    assert found[0][1].evidence["recent_best"] == pytest.approx(0.72)
    fresh = EpochChecks()  # the first epochs of a round (fresh hosts) are never judged
    assert fresh.run(_signals(1, 1, acc=(0.5, 0.5)), []) == [] and fresh.run(_signals(1, 2, acc=(0.1, 0.1)), []) == []
    assert fresh.run(_signals(1, 3, acc=(0.1, 0.1)), []) == []


def test_value_collapse_across_envs_and_over_time():
    checks = EpochChecks()
    _warm(checks)
    # Two envs' estimates may coincide by chance; a collapsed critic also stops moving.
    assert checks.run(_signals(3, 1, policy=_policy(values=(0.25, 0.25))), []) == []
    found = checks.run(_signals(3, 2, policy=_policy(values=(0.25, 0.25))), [])
    assert _kinds(found) == [("value_collapse", None)] and "across envs" in found[0][1].detail
    assert "next" in found[0][1].detail
    single = EpochChecks()  # one env: only the movement from one decision to the next can tell
    for e in range(1, 7):
        assert single.run(_signals(1, e, acc=(0.5,), loss=(1.0,), policy=_policy((0.1 * e,), (0.9,))), []) == []
    single.run(_signals(1, 7, acc=(0.5,), loss=(1.0,), policy=_policy((0.3,), (0.9,))), [])
    found = single.run(_signals(1, 8, acc=(0.5,), loss=(1.0,), policy=_policy((0.3,), (0.9,))), [])
    assert _kinds(found) == [("value_collapse", None)] and "next" in found[0][1].detail


def test_entropy_collapse_against_its_own_median():
    checks = EpochChecks()
    _warm(checks)
    assert checks.run(_signals(3, 1, policy=_policy((0.1, 0.3), entropy=(0.5, 0.4))), []) == []  # a drop only
    found = checks.run(_signals(3, 2, policy=_policy((0.4, -0.1), entropy=(0.01, 0.02))), [])
    assert _kinds(found) == [("entropy_collapse", None)] and found[0][1].evidence["entropy"] == pytest.approx(0.015)


def test_detector_escalates_an_epoch_finding_and_forwards_forgotten_scopes():
    opened: list[str] = []
    detector = AnomalyDetector(escalate=lambda reason, epochs: opened.append(reason) or "auto-1")
    (env, finding), = detector.check_epoch(None, [(0, _grad("r0c0", 0.0))])
    assert env == 0 and finding.auto_escalated and opened == ["auto: dead_seed"]
    assert detector.check_epoch(None, [(0, _grad("r0c0", 0.0))]) == []  # still dead: no second event
    detector.forget_scope(0, "r0c0")  # a new seed in the slot: its checks re-arm
    (_, again), = detector.check_epoch(None, [(0, _grad("r0c0", 0.0))])
    assert again.anomaly == "dead_seed" and not again.auto_escalated  # inside the cooldown


@pytest.mark.parametrize("kwargs", [{"min_history": 0}, {"explosion_factor": 1.0}, {"dead_factor": 1.5},
                                    {"degradation": 0.0}, {"drift_epochs": 0}, {"loss_spike": 0.5}])
def test_config_is_validated(kwargs):
    with pytest.raises(ValueError):
        EpochCheckConfig(**kwargs)
