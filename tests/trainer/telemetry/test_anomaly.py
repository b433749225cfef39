"""Each anomaly check on crafted metrics, ``check_all`` wiring, and auto-escalation through the real command path."""

from __future__ import annotations

import math

import msgspec
import pytest

from leyline import (
    CommandStatus,
    CommandStatusChanged,
    DebugRequest,
    TelemetryLevel,
    TelemetryLevelChanged,
    decode_event,
    encode_event,
    make_event,
)
from leyline.esper import LSTMHealth, PPOUpdate
from nissa.control import CommandProcessor, DebugHandler, LevelController
from trainer.telemetry.anomaly import AnomalyConfig, AnomalyDetector
from trainer.telemetry.ema import Drift
from trainer.telemetry.gradients import GradientStats

HEADS = {"op": 6, "slot": 1, "blueprint": 7, "tempo": 3}
HEALTHY = PPOUpdate(round=1, policy_loss=-0.01, value_loss=0.4, entropy={"op": 1.5, "slot": 0.0, "blueprint": 1.8},
                    approx_kl=0.01, clip_fraction=0.1, explained_variance=0.5, ratio_min=0.8, ratio_max=1.2,
                    grad_norm=0.9, update_epochs=4, value_std=0.3, return_std=0.5)
LSTM_OK = LSTMHealth(h_norm=2.0, c_norm=3.0, h_max=0.9, c_max=2.0)


def _update(**changes: object) -> PPOUpdate:
    return msgspec.structs.replace(HEALTHY, **changes)


def _kinds(found) -> list[str]:
    return [f.anomaly for f in found]


def test_healthy_update_finds_nothing():
    assert AnomalyDetector().check_all(HEALTHY, head_sizes=HEADS, lstm=LSTM_OK) == []


@pytest.mark.parametrize("changes, expected", [
    ({"ratio_max": 7.5}, "ratio_explosion"),
    ({"ratio_min": 0.02}, "ratio_collapse"),
    ({"approx_kl": 0.4}, "kl_spike"),
    ({"value_std": 1e-6}, "value_collapse"),
    ({"entropy": {"op": 0.01, "slot": 0.0}}, "entropy_collapse"),
    ({"value_loss": math.nan}, "nan_inf"),
    ({"grad_norm": math.inf}, "nan_inf"),
])
def test_each_update_check_fires_on_crafted_metrics(changes, expected):
    found = AnomalyDetector().check_all(_update(**changes), head_sizes=HEADS)
    assert _kinds(found) == [expected]
    assert found[0].evidence and found[0].detail


def test_evidence_holds_the_numbers_and_survives_the_wire():
    (finding,) = AnomalyDetector().check_all(_update(ratio_max=7.5), head_sizes=HEADS)
    assert finding.evidence["ratio_max"] == 7.5 and finding.evidence["threshold"] == 5.0
    (nan,) = AnomalyDetector().check_all(_update(value_loss=math.nan), head_sizes=HEADS)
    assert nan.evidence["value_loss_nonfinite"] == 1.0 and "value_loss" not in nan.evidence
    for payload in (finding, nan):
        assert decode_event(encode_event(make_event(payload, run_id="r", seq=1, ts=0.0))).payload == payload


def test_value_collapse_is_the_critics_spread_against_the_returns_spread():
    d = AnomalyDetector()
    # A critic that fits badly is not a collapsed one: explained variance alone never fires.
    assert d.check_value(0.2, 0.5, explained_variance=-0.9) is None
    flat = d.check_value(1e-5, 0.5, explained_variance=0.0)
    assert flat is not None and flat.evidence["value_std"] == 1e-5 and flat.evidence["explained_variance"] == 0.0
    assert "spread" in flat.detail
    assert d.check_value(0.0, 0.0) is None  # nothing to track: no judgement
    assert d.check_value(None, 0.5) is None and d.check_value(math.nan, 0.5) is None


def test_entropy_is_normalised_by_head_size_and_single_choice_heads_are_skipped():
    d = AnomalyDetector()
    assert d.check_entropy({"slot": 0.0}, {"slot": 1}) is None  # one slot: zero entropy is the only option
    assert d.check_entropy({"tempo": 0.2}, {"tempo": 3}) is None  # 0.2 / ln 3 = 0.18
    found = d.check_entropy({"tempo": 0.05, "op": 1.2}, {"tempo": 3, "op": 6})
    assert found is not None and set(found.evidence) == {"threshold", "entropy_tempo"}
    assert d.check_entropy({"blueprint": 0.0}, {"blueprint": 7}) is None  # no op used the head this update


def test_gradient_drift_is_part_of_check_all():
    drift = Drift(ema_norm=1.0, drift=4.0, updates=20)
    found = AnomalyDetector().check_all(HEALTHY, head_sizes=HEADS, drift=drift)
    assert _kinds(found) == ["gradient_drift"]
    young = Drift(ema_norm=1.0, drift=4.0, updates=3)
    assert AnomalyDetector().check_all(HEALTHY, head_sizes=HEADS, drift=young) == []


def test_nonfinite_gradients_and_lstm_state():
    grads = GradientStats(scope="policy", global_norm=math.nan, max_tensor_norm=1.0, n_tensors=3, n_params=30,
                          nonfinite=1, vanishing=False, exploding=True)
    found = AnomalyDetector().check_all(HEALTHY, head_sizes=HEADS, grads=grads)
    assert _kinds(found) == ["nan_inf"] and found[0].evidence["nonfinite_grad_tensors"] == 1.0
    lstm = msgspec.structs.replace(LSTM_OK, nonfinite=True)
    assert "LSTM" in AnomalyDetector().check_all(HEALTHY, head_sizes=HEADS, lstm=lstm)[0].detail


def test_lstm_explosion_and_vanishing():
    hot = msgspec.structs.replace(LSTM_OK, c_norm=500.0, exploding=True)
    cold = msgspec.structs.replace(LSTM_OK, h_norm=0.0, vanishing=True)
    assert _kinds(AnomalyDetector().check_all(HEALTHY, head_sizes=HEADS, lstm=hot)) == ["lstm_explosion"]
    assert _kinds(AnomalyDetector().check_all(HEALTHY, head_sizes=HEADS, lstm=cold)) == ["lstm_vanishing"]


def test_several_anomalies_at_once():
    found = AnomalyDetector().check_all(_update(ratio_max=9.0, approx_kl=0.5), head_sizes=HEADS)
    assert _kinds(found) == ["ratio_explosion", "kl_spike"]


def _control() -> tuple[CommandProcessor, LevelController, list]:
    events: list = []
    levels = LevelController(TelemetryLevel.NORMAL, events.append)
    processor = CommandProcessor(events.append, lambda: [])
    processor.register(DebugRequest, DebugHandler(levels))
    return processor, levels, events


def test_auto_escalation_opens_a_debug_window_through_the_command_path():
    processor, levels, events = _control()
    detector = AnomalyDetector(AnomalyConfig(escalate_epochs=2), escalate=lambda reason, epochs: (
        processor.issue(DebugRequest(run_id="r", epochs=epochs, through_update=True, reason=reason))))
    found = detector.check_all(_update(approx_kl=0.4), head_sizes=HEADS)
    assert found[0].auto_escalated and len(detector.escalations) == 1
    command_id = detector.escalations[0]
    processor.step_boundary(step=10, epoch=3)  # commands apply only at a step boundary
    assert levels.level is TelemetryLevel.DEBUG
    statuses = [(e.status, e.applied_step) for e in events if isinstance(e, CommandStatusChanged)]
    assert statuses == [(CommandStatus.DELIVERED, None), (CommandStatus.APPLIED, 10)]
    changed = [e for e in events if isinstance(e, TelemetryLevelChanged)]
    assert changed[0].command_id == command_id and "auto: kl_spike" in changed[0].reason
    # The window covers the next PPO update, then the two epochs, and reverts by itself.
    processor.update_begin(1)
    processor.update_end(1)
    processor.epoch_end(4)
    assert levels.level is TelemetryLevel.NORMAL
    done = [e for e in events if isinstance(e, CommandStatusChanged) and e.status is CommandStatus.COMPLETED]
    assert done and done[0].command_id == command_id and done[0].result["covered_update"] is True


def test_escalation_cooldown_and_switch():
    processor, _, _ = _control()
    calls: list[str] = []

    def escalate(reason: str, epochs: int) -> str:
        calls.append(reason)
        return processor.issue(DebugRequest(run_id="r", epochs=epochs, through_update=True, reason=reason))

    detector = AnomalyDetector(AnomalyConfig(cooldown_updates=2), escalate=escalate)
    flags = [detector.check_all(_update(approx_kl=0.4), head_sizes=HEADS)[0].auto_escalated
             for _ in range(5)]
    assert flags == [True, False, False, True, False]
    off = AnomalyDetector(AnomalyConfig(auto_escalate=False), escalate=escalate)
    assert not off.check_all(_update(approx_kl=0.4), head_sizes=HEADS)[0].auto_escalated
    assert len(calls) == 2


def test_only_the_configured_anomalies_escalate():
    opened: list[str] = []
    detector = AnomalyDetector(AnomalyConfig(escalate_on=frozenset({"kl_spike"})),
                               escalate=lambda reason, epochs: opened.append(reason) or "auto-x")
    found = detector.check_all(_update(value_std=0.0, approx_kl=0.4), head_sizes=HEADS)
    assert [(f.anomaly, f.auto_escalated) for f in found] == [("value_collapse", False), ("kl_spike", True)]
    assert opened == ["auto: kl_spike"]


def test_cooldown_counts_epochs_once_the_detector_sees_them():
    opened: list[str] = []
    detector = AnomalyDetector(AnomalyConfig(cooldown_epochs=3),
                               escalate=lambda reason, epochs: opened.append(reason) or "auto-x")
    assert detector.check_all(_update(approx_kl=0.4), head_sizes=HEADS)[0].auto_escalated
    flags = []
    for _ in range(4):
        detector.check_epoch(None, [])
        flags.append(detector.check_all(_update(approx_kl=0.4), head_sizes=HEADS)[0].auto_escalated)
    assert flags == [False, False, True, False]


@pytest.mark.parametrize("kwargs", [{"ratio_collapse": 1.5}, {"value_spread": 0.0}, {"kl_spike": 0.0},
                                    {"escalate_epochs": 0}, {"escalate_on": frozenset({"typo"})}])
def test_config_is_validated(kwargs):
    with pytest.raises(ValueError):
        AnomalyConfig(**kwargs)
