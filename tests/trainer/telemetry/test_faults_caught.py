"""A fault injected through the loop's seam is caught by the real loop, runtime and run log.

The faults are the anomaly benchmark's own (``bench/faults.py``, at their extreme doses), run through
its ``inject`` next to a twin run without the fault: a dead seed (read from the per-epoch gradient
collections) and a collapsed policy entropy (read from the decision's signals), each caught within two
epochs, in the env it struck, and opening a DEBUG window by itself.
"""

from __future__ import annotations

import pathlib

import pytest
import torch

from trainer.simic.config import TrainConfig

ROOT = pathlib.Path(__file__).resolve().parents[3]
SMALL = dict(device="cpu", n_envs=2, episode_length=10, rounds=2, train_size=128, val_size=64, batch_size=64,
             log_every=0, lstm_hidden=8, base_channels=4, gradient_telemetry_stride=2, seed=1, min_training_epochs=1)


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
    fault = next(f for f in faults.standard_faults(SMALL["episode_length"] + 5) if f.name == name)
    config = TrainConfig(**dict(SMALL, policy=fault.policy))
    twin = anomaly_detection.run(config, "twin", tmp_path)
    outcome = anomaly_detection.inject(config, fault, tmp_path, twin, window=4)
    assert outcome.caught and outcome.delay is not None and 1 <= outcome.delay <= 2, outcome
    assert outcome.window_delay is not None and outcome.window_delay >= outcome.delay
    assert outcome.false_alarms == 0


def test_a_fault_with_nothing_to_break_says_so(bench, tmp_path):
    anomaly_detection, faults = bench
    dead = next(f for f in faults.standard_faults(1) if f.name == "dead_seed")  # no seed yet after epoch 1
    config = TrainConfig(**dict(SMALL, policy=dead.policy))
    with pytest.raises(faults.FaultNotApplicable, match="no training seed"):
        anomaly_detection.inject(config, dead, tmp_path, twin=None, window=4)  # type: ignore[arg-type]


def test_a_catch_counts_only_in_the_struck_env_and_the_window_after_the_injection(bench):
    anomaly_detection, faults = bench
    lr, labels = (next(f for f in faults.dosed_faults(16) if f.name == name)
                  for name in ("lr_spike", "label_corruption"))
    report = anomaly_detection.RunReport("r", 30, [
        (16, 0, "loss_spike", "before"), (17, 1, "loss_spike", "other env"), (18, 0, "kl_spike", "other kind"),
        (23, 0, "loss_spike", "too late"), (19, 0, "loss_spike", "caught"), (18, 1, "performance_degradation", "any")],
        [], {})
    assert [a[3] for a in anomaly_detection.catches(report, lr, window=6)] == ["caught"]
    assert [a[3] for a in anomaly_detection.catches(report, labels, window=6)] == ["any"]  # a run-wide fault
    assert [f.dose for f in faults.dosed_faults(16) if f.name == "lr_spike"] == [3, 10, 30, 100, 300]
    assert all(len(kind.doses) >= 4 for kind in faults.KINDS)
