"""The loop's host-sync budget, counted on CPU for what would be device→host syncs on a GPU.

NORMAL: at most 4 per epoch plus one per gradient-telemetry collection (its stride); DEBUG:
one per collection (every batch), whatever the number of envs and scopes. The counter
follows the loop's explicit split of where tensors live (``trainer.simic.runtime``).
"""

from __future__ import annotations

import pytest
import torch

from leyline import TelemetryLevel
from nissa.telemetry.syncs import HostSyncCounter
from trainer.build import build_trainer
from trainer.hooks import NullHooks
from trainer.simic.config import TrainConfig
from trainer.simic.diagnostics import count_host_syncs

TINY = dict(device="cpu", rounds=2, episode_length=3, train_size=256, val_size=64, batch_size=64, base_channels=4,
            lstm_hidden=8, log_every=0, gradient_telemetry_stride=2, min_training_epochs=1, min_prune_age=1,
            embargo_epochs=1, slots=("r0c0", "r0c1", "r0c2"))
BATCHES = 256 // 64
NORMAL_BUDGET = 4


pytestmark = pytest.mark.usefixtures("one_thread")


def _syncs(level: TelemetryLevel, n_envs: int, policy: str = "ppo", **over):
    config = TrainConfig(**{**TINY, "policy": policy, "n_envs": n_envs, **over})
    return count_host_syncs(lambda hooks: build_trainer(config, hooks), NullHooks(level), config.device,
                            live_seeds=2)


def test_counter_tells_device_reads_from_host_bookkeeping():
    device = torch.device("cpu")
    weights = torch.ones(4)  # made before the counter: taken to live on the device
    with HostSyncCounter(device) as counter:
        loss = (weights * 2).sum()
        rewards = torch.tensor([1.0, 2.0])  # bookkeeping from Python values: host
        rewards.tolist(), float(rewards.sum()), bool(rewards[0] > 0)
        assert counter.count == 0
        loss.item()
        float(loss)
        row = torch.stack([loss, loss]).cpu()  # one read back ...
        row.tolist()  # ... and its host copy is free
        weights[weights > 0]  # a value-dependent shape
        torch.tensor([1.0], device=device)  # a blocking upload
        torch.zeros(3).to(device, non_blocking=True)  # an asynchronous one is not a sync
    assert counter.count == 5
    assert dict(counter.by_call) == {"item": 1, "__float__": 1, "cpu": 1, "__getitem__": 1, "tensor": 1}


def test_normal_stays_within_budget_and_does_not_grow_with_envs():
    one, three = _syncs(TelemetryLevel.NORMAL, 1), _syncs(TelemetryLevel.NORMAL, 3)
    assert three.epochs == one.epochs and three.update == one.update, "no sync per env"
    for syncs, collections in zip(three.epochs, three.collections, strict=True):
        assert syncs <= NORMAL_BUDGET + collections, three
    assert three.collections == [BATCHES // 2] * 3  # the stride
    # Today: validation's metrics row and the policy's actions, one read each, plus the collections.
    assert three.epochs[0] == 2 + three.collections[0], three


def test_debug_reads_once_per_collection_not_per_env_or_scope():
    one, three = _syncs(TelemetryLevel.DEBUG, 1), _syncs(TelemetryLevel.DEBUG, 3)
    assert three.collections == [BATCHES] * 3  # every batch at DEBUG
    assert three.epochs == one.epochs, "DEBUG layer stats of every env and scope in one read per collection"
    for syncs, collections in zip(three.epochs, three.collections, strict=True):
        assert syncs <= NORMAL_BUDGET + collections, three


def test_heuristic_decision_reads_nothing_from_the_device():
    syncs = _syncs(TelemetryLevel.NORMAL, 2, policy="heuristic")
    assert syncs.epochs == [1 + c for c in syncs.collections] and syncs.update == 0


def test_float16_with_its_grad_scaler_reads_nothing_more():
    # The scaler's inf check is a device tensor; an unfused optimizer step reads it on the host.
    # float16 autocast is slow on CPU: one env, smaller batches.
    syncs = _syncs(TelemetryLevel.NORMAL, 1, policy="heuristic", amp_dtype="float16", batch_size=32,
                   train_size=128)
    assert syncs.epochs == [1 + c for c in syncs.collections], syncs
