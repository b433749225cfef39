"""A fault injected through the loop's seam is caught by the real loop, runtime and run log.

The faults are the anomaly benchmark's own (``bench/faults.py``), run through its ``inject``: a
dead seed (read from the per-epoch gradient collections) and a collapsed policy entropy (read from
the decision's signals), each caught within two epochs and opening a DEBUG window by itself.
"""

from __future__ import annotations

import pathlib

import pytest
import torch

from trainer.simic.config import TrainConfig

ROOT = pathlib.Path(__file__).resolve().parents[3]
SMALL = dict(device="cpu", n_envs=2, episode_length=6, rounds=2, train_size=128, val_size=64, batch_size=64,
             log_every=0, lstm_hidden=8, base_channels=4, gradient_telemetry_stride=2, seed=1)


@pytest.fixture()
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    import anomaly_detection
    import faults
    yield anomaly_detection, faults
    torch.set_num_threads(before)


@pytest.mark.parametrize("name", ["dead_seed", "entropy_collapse"])
def test_an_injected_fault_is_caught_within_two_epochs(bench, tmp_path, name):
    anomaly_detection, faults = bench
    base = TrainConfig(**SMALL)
    fault = next(f for f in faults.standard_faults(base.episode_length + 3) if f.name == name)
    outcome = anomaly_detection.inject(base, fault, tmp_path)
    assert outcome.caught and outcome.delay is not None and 1 <= outcome.delay <= 2, outcome
    assert outcome.window_delay is not None and outcome.window_delay >= outcome.delay
    assert outcome.false_alarms == 0


def test_a_fault_with_nothing_to_break_says_so(bench, tmp_path):
    anomaly_detection, faults = bench
    base = TrainConfig(**SMALL)
    dead = next(f for f in faults.standard_faults(1) if f.name == "dead_seed")  # no seed yet after epoch 1
    with pytest.raises(faults.FaultNotApplicable, match="no training seed"):
        anomaly_detection.inject(base, dead, tmp_path)
