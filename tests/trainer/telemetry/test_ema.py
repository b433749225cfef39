"""Bias-corrected gradient EMA: correction, drift against the past, stability near zero, state round trip."""

from __future__ import annotations

import math

import pytest

from trainer.telemetry.ema import BiasCorrectedEMA, EMAConfig, GradientEMATracker


def test_bias_correction_makes_a_constant_series_its_own_average():
    ema = BiasCorrectedEMA(EMAConfig(momentum=0.99))
    for _ in range(3):
        ema.update(4.0)
        assert ema.value == pytest.approx(4.0)  # an uncorrected EMA would say 0.04, 0.0796, ...


def test_matches_hand_computed_values():
    ema = BiasCorrectedEMA(EMAConfig(momentum=0.5))
    ema.update(2.0)  # raw 1.0, corrected 1.0 / 0.5
    ema.update(4.0)  # raw 0.5 + 2.0 = 2.5, corrected 2.5 / 0.75
    assert ema.value == pytest.approx(2.5 / 0.75)


def test_drift_is_measured_against_the_average_before_the_value():
    tracker = GradientEMATracker(EMAConfig(momentum=0.9))
    first = tracker.update("policy", 1.0)
    assert first.drift is None and first.ema_norm == pytest.approx(1.0)
    for _ in range(10):
        tracker.update("policy", 1.0)
    jump = tracker.update("policy", 3.0)
    assert jump.drift == pytest.approx(2.0)  # |3 - 1| / 1, not diluted by 3 joining the average first


def test_drift_stays_bounded_when_the_average_approaches_zero():
    tracker = GradientEMATracker(EMAConfig(momentum=0.9, floor=1e-6))
    for _ in range(20):
        tracker.update("seed", 1e-12)
    d = tracker.update("seed", 3e-12)
    assert d.drift is not None and d.drift < 1e-5  # dividing by the raw 1e-12 average would give 2.0
    d = tracker.update("seed", 0.0)
    assert d.drift is not None and d.drift < 1e-5


def test_non_finite_values_are_not_averaged_in():
    tracker = GradientEMATracker()
    tracker.update("h", 2.0)
    d = tracker.update("h", math.nan)
    assert d.drift is None and d.ema_norm == pytest.approx(2.0) and d.updates == 1
    d = tracker.update("h", None)
    assert d.drift is None and d.updates == 1


def test_state_dict_round_trip_continues_identically():
    a = GradientEMATracker(EMAConfig(momentum=0.8, floor=1e-5))
    for x in (1.0, 2.0, 0.5):
        a.update("host", x)
        a.update("r0c1", 10 * x)
    b = GradientEMATracker()
    b.load_state_dict(a.state_dict())
    assert b.config == a.config
    for x in (0.7, 3.0):
        da, db = a.update("host", x), b.update("host", x)
        assert da == db
    assert b.value("r0c1") == a.value("r0c1")
    with pytest.raises(TypeError):
        b.load_state_dict({"momentum": 0.9, "floor": 1e-6, "series": [1, 2]})


def test_forget_starts_a_scope_afresh():
    tracker = GradientEMATracker()
    tracker.update("r0c0", 5.0)
    tracker.forget("r0c0")
    assert tracker.value("r0c0") is None


@pytest.mark.parametrize("kwargs", [{"momentum": 1.0}, {"momentum": -0.1}, {"floor": 0.0}])
def test_config_is_validated(kwargs):
    with pytest.raises(ValueError):
        EMAConfig(**kwargs)
