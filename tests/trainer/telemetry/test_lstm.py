"""LSTM health: norms per sample, NaN/Inf flagged without poisoning the numbers, one transfer."""

from __future__ import annotations

import pytest
import torch

from leyline import decode_event, encode_event, make_event
from nissa.telemetry.syncs import HostSyncCounter
from trainer.telemetry.lstm import LSTMThresholds, lstm_health


def test_norms_are_mean_per_sample_norms_of_a_real_lstm_state():
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(8, 16, batch_first=True)
    with torch.no_grad():
        _, (h, c) = lstm(torch.randn(4, 5, 8))
    health = lstm_health(h, c)
    assert health.h_norm == pytest.approx(float(h.norm(dim=-1).mean()), rel=1e-6)
    assert health.c_norm == pytest.approx(float(c.norm(dim=-1).mean()), rel=1e-6)
    assert health.h_max == pytest.approx(float(h.abs().max()))
    assert not (health.nonfinite or health.exploding or health.vanishing)


def test_norm_does_not_grow_with_the_batch():
    h = torch.ones(1, 2, 4)
    big = torch.ones(1, 200, 4)
    assert lstm_health(h, h).h_norm == pytest.approx(lstm_health(big, big).h_norm)


def test_explosion_and_vanishing():
    t = LSTMThresholds(max_norm=10.0, min_norm=1e-4)
    hot = lstm_health(torch.ones(1, 2, 4), torch.full((1, 2, 4), 50.0), t)
    assert hot.exploding and not hot.vanishing
    cold = lstm_health(torch.zeros(1, 2, 4), torch.zeros(1, 2, 4), t)
    assert cold.vanishing and not cold.exploding


def test_nan_is_flagged_and_numbers_stay_encodable():
    h = torch.tensor([[[1.0, float("nan")], [0.0, 2.0]]])
    c = torch.tensor([[[float("inf"), 1.0], [1.0, 1.0]]])
    health = lstm_health(h, c)
    assert health.nonfinite
    assert health.h_max == pytest.approx(2.0)
    event = decode_event(encode_event(make_event(health, run_id="r", seq=1, ts=0.0)))
    assert event.payload == health


def test_one_transfer():
    h, c = torch.randn(1, 3, 4), torch.randn(1, 3, 4)
    with HostSyncCounter(torch.device("cpu")) as syncs:
        lstm_health(h, c)
    assert syncs.count == 1, syncs.by_call
