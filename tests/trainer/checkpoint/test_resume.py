"""A run resumed from a round-boundary checkpoint repeats the uninterrupted run exactly (CPU, one seed)."""

from __future__ import annotations

import dataclasses

import msgspec
import pytest
import torch

from leyline import PhaseTiming, TelemetryLevel, encode_event, make_event
from leyline.esper import PPOUpdate
from tests.trainer.test_build import TINY, RecordingHooks
from trainer.build import build_trainer, run_training
from trainer.checkpoint import CheckpointConfig, Checkpointer, CheckpointStore
from trainer.data import make_synthetic
from trainer.simic.config import TrainConfig

CONFIG = TrainConfig(**{**TINY, "n_envs": 2, "rounds": 3, "episode_length": 4, "seed": 3})


def checkpointer(root, config: TrainConfig, every: int = 1) -> Checkpointer:
    return Checkpointer(CheckpointConfig(every=every, keep=5), CheckpointStore(root),
                        run_config=config.as_flat_dict(), manifest={"run_id": "r", "world_size": 1},
                        hub_seq=lambda: 0, control_state=lambda: {"level": "NORMAL", "windows": []})


def wire(payloads) -> list[bytes]:
    """Events as they would travel (timings aside: they measure the process, not the run)."""
    return [encode_event(make_event(p, run_id="r", seq=1, ts=0.0, step=0, epoch=0, env=env))
            for env, p in payloads if not isinstance(p, PhaseTiming)]


@pytest.fixture(scope="module")
def data():
    return make_synthetic(0, TINY["train_size"], TINY["val_size"])


def test_resumed_run_repeats_the_uninterrupted_one(tmp_path, data, one_thread):
    full_hooks = RecordingHooks(TelemetryLevel.NORMAL)
    full_ckpt = checkpointer(tmp_path / "full", CONFIG)
    full = run_training(CONFIG, full_hooks, data=data, checkpoints=full_ckpt)
    assert [w.name for w in full_ckpt.written] == ["round-000001", "round-000002", "round-000003"]

    state = CheckpointStore(tmp_path / "full").load("round-000001")
    resumed_hooks = RecordingHooks(TelemetryLevel.NORMAL)
    resumed = run_training(CONFIG, resumed_hooks, data=data, resume=state,
                           checkpoints=checkpointer(tmp_path / "resumed", CONFIG))

    after = wire(resumed_hooks.events)
    assert len(after) > 10 and after == wire(full_hooks.events)[-len(after):]
    assert [p.round for _, p in resumed_hooks.of(PPOUpdate)] == [2, 3]
    assert msgspec.structs.replace(resumed, duration_s=0.0) == msgspec.structs.replace(full, duration_s=0.0)
    # the final policies are equal to the bit
    a = CheckpointStore(tmp_path / "full").load("round-000003")["agent"]["policy"]
    b = CheckpointStore(tmp_path / "resumed").load("round-000003")["agent"]["policy"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_checkpoint_holds_the_policy_normalizers_and_generators(tmp_path, data, one_thread):
    hooks = RecordingHooks(TelemetryLevel.NORMAL)
    ckpt = checkpointer(tmp_path, CONFIG)
    run_training(dataclasses.replace(CONFIG, rounds=1), hooks, data=data, checkpoints=ckpt)
    state = CheckpointStore(tmp_path).load("round-000001")
    assert state["progress"]["round"] == 1 and state["progress"]["epoch"] == CONFIG.episode_length
    assert set(state["agent"]) == {"policy", "optimizer", "obs_norm", "reward_norm", "value_norm", "generator"}
    assert state["agent"]["reward_norm"]["count"] > 0
    assert set(state["rng"]) == {"torch", "cuda", "python"} and state["data_order"].dtype == torch.uint8
    assert state["telemetry"]["detector"]["updates"] == 1
    trainer = build_trainer(CONFIG, hooks, data=data)
    assert not torch.equal(trainer.agent.state_dict()["policy"]["critic.2.weight"],
                           state["agent"]["policy"]["critic.2.weight"])


class _Asked:
    """Where a command's outcome goes (what the checkpointer needs of a ``stop`` it holds)."""

    command_id = "stop-1"

    def __init__(self) -> None:
        self.outcome: dict | str | None = None

    def complete(self, result=None, message=""):
        self.outcome = result

    def fail(self, message, result=None):
        self.outcome = message


class _StopAt(RecordingHooks):
    """Hooks that apply a ``stop`` during epoch ``epoch`` (as the command path would, at a step of it)."""

    def __init__(self, epoch: int, ckpt: Checkpointer, asked: _Asked) -> None:
        super().__init__(TelemetryLevel.NORMAL)
        self.at, self.ckpt, self.asked = epoch, ckpt, asked

    def step_boundary(self, step, epoch):
        super().step_boundary(step, epoch)
        if epoch == self.at and self.ckpt.stop_asked is None:
            self.ckpt.stop_asked = self.asked  # type: ignore[assignment]


def test_stop_ends_the_run_at_the_epochs_end_and_a_resume_trains_that_round_again(tmp_path, data, one_thread):
    """``stop`` in epoch 2 of round 2: the run ends after that epoch, with round 1's boundary written (no
    checkpoint was due); resumed from it, the run repeats the uninterrupted one exactly."""
    full_hooks = RecordingHooks(TelemetryLevel.NORMAL)
    full = run_training(CONFIG, full_hooks, data=data, checkpoints=checkpointer(tmp_path / "full", CONFIG, every=0))

    asked, ckpt = _Asked(), checkpointer(tmp_path / "stopped", CONFIG, every=0)
    hooks = _StopAt(CONFIG.episode_length + 2, ckpt, asked)
    stopped = run_training(CONFIG, hooks, data=data, checkpoints=ckpt)
    assert (stopped.status, stopped.rounds, stopped.epochs) == ("stopped", 1, CONFIG.episode_length + 2)
    assert hooks.epochs[-1] == CONFIG.episode_length + 2 and [p.round for _, p in hooks.of(PPOUpdate)] == [1]
    assert [w.name for w in ckpt.written] == ["round-000001"]
    assert isinstance(asked.outcome, dict) and asked.outcome["round"] == 1
    assert asked.outcome["step"] == hooks.steps[len(hooks.steps) // (CONFIG.episode_length + 2)
                                                * CONFIG.episode_length - 1][0]

    resumed_hooks = RecordingHooks(TelemetryLevel.NORMAL)
    resumed = run_training(CONFIG, resumed_hooks, data=data, resume=CheckpointStore(tmp_path / "stopped").load(
        "round-000001"), checkpoints=checkpointer(tmp_path / "resumed", CONFIG, every=0))
    after = wire(resumed_hooks.events)
    assert len(after) > 10 and after == wire(full_hooks.events)[-len(after):]
    assert msgspec.structs.replace(resumed, duration_s=0.0) == msgspec.structs.replace(full, duration_s=0.0)


def test_a_stop_before_the_first_round_of_a_resume_ends_keeps_the_checkpoint_it_resumed_from(tmp_path, data,
                                                                                           one_thread):
    """Stopped in the first epoch after a resume, the run's boundary is the checkpoint it came from: the stop
    completes with it, and it is not written again (a rewrite that failed would lose the only resume point)."""
    ckpt = checkpointer(tmp_path, CONFIG, every=1)
    run_training(dataclasses.replace(CONFIG, rounds=1), RecordingHooks(TelemetryLevel.NORMAL), data=data,
                 checkpoints=ckpt)
    manifest = (tmp_path / "round-000001" / "rank0.json").read_bytes()

    asked, again = _Asked(), checkpointer(tmp_path, CONFIG, every=1)
    stopped = run_training(CONFIG, _StopAt(CONFIG.episode_length + 1, again, asked), data=data,
                           resume=CheckpointStore(tmp_path).load("round-000001"), checkpoints=again)
    assert stopped.status == "stopped" and stopped.rounds == 1
    assert isinstance(asked.outcome, dict) and asked.outcome["round"] == 1
    assert asked.outcome["path"] == str(tmp_path / "round-000001") and asked.outcome["bytes"] > 0
    assert (tmp_path / "round-000001" / "rank0.json").read_bytes() == manifest  # untouched
