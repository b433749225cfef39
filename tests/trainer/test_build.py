"""Whole runs on tiny configs: the heuristic fossilizes, PPO repeats exactly, events are complete."""

from collections import Counter

import pytest

from leyline import TelemetryLevel, encode_event, make_event
from leyline.esper import EpochCompleted, PPOUpdate, SeedFossilized, SeedStage, SeedStageChanged
from trainer.build import run_training
from trainer.data import make_synthetic
from trainer.hooks import NullHooks
from trainer.kasmina.lifecycle import check_transition
from trainer.simic.config import TrainConfig
from trainer.simic.sites import NullSites

TINY = dict(train_size=256, val_size=128, batch_size=64, base_channels=4, device="cpu", log_every=0,
            min_training_epochs=1, min_prune_age=1, embargo_epochs=1, lstm_hidden=16)


class RecordingHooks:
    """Real hooks that keep what the loop reports (the loop's only view of telemetry)."""

    def __init__(self, level: TelemetryLevel = TelemetryLevel.NORMAL) -> None:
        self.level = level
        self.events: list[tuple[int | None, object]] = []
        self.steps: list[tuple[int, int]] = []
        self.epochs: list[int] = []
        self.updates: list[tuple[str, int]] = []

    def emit(self, payload, *, env=None, severity=None):
        self.events.append((env, payload))

    def step_boundary(self, step, epoch):
        self.steps.append((step, epoch))

    def epoch_end(self, epoch):
        self.epochs.append(epoch)

    def update_begin(self, round_):
        self.updates.append(("begin", round_))

    def update_end(self, round_):
        self.updates.append(("end", round_))

    def of(self, kind):
        return [(env, p) for env, p in self.events if isinstance(p, kind)]


@pytest.fixture(scope="module")
def data():
    return make_synthetic(0, TINY["train_size"], TINY["val_size"])


@pytest.fixture(scope="module")
def heuristic_run():
    hooks = RecordingHooks()
    # 512 validation images: on fewer, the contributions of these small seeds stay within their noise
    config = TrainConfig(policy="heuristic", n_envs=3, rounds=1, episode_length=12, seed=3,
                         **dict(TINY, val_size=512))
    data = make_synthetic(0, config.train_size, config.val_size)
    return config, run_training(config, hooks, data=data), hooks


def test_heuristic_run_reaches_fossilized(heuristic_run):
    _, summary, hooks = heuristic_run
    fossils = hooks.of(SeedFossilized)
    assert fossils and summary.fossilized == len(fossils)
    assert any(p.to_stage is SeedStage.FOSSILIZED for _, p in hooks.of(SeedStageChanged))
    assert summary.status == "completed" and summary.epochs == 12


def test_every_reported_transition_is_legal_and_in_order(heuristic_run):
    _, _, hooks = heuristic_run
    stage: dict[tuple[int, str], SeedStage] = {}
    for env, p in hooks.of(SeedStageChanged):
        key = (env, p.slot)
        assert stage.get(key, SeedStage.DORMANT) is p.from_stage
        check_transition(p.from_stage, p.to_stage)
        stage[key] = p.to_stage


def test_epoch_events_steps_and_boundaries(heuristic_run):
    config, _, hooks = heuristic_run
    epochs = hooks.of(EpochCompleted)
    assert len(epochs) == config.n_envs * config.episode_length
    assert Counter(env for env, _ in epochs) == {0: 12, 1: 12, 2: 12}
    assert all(len(p.seeds) == len(config.slots) and 0.0 <= p.accuracy <= 1.0 for _, p in epochs)
    assert hooks.epochs == list(range(1, 13))
    per_epoch = config.train_size // config.batch_size
    assert [s for s, _ in hooks.steps] == list(range(1, 12 * per_epoch + 1))
    assert [e for _, e in hooks.steps] == [1 + i // per_epoch for i in range(12 * per_epoch)]
    assert hooks.updates == [("begin", 1), ("end", 1)]
    for env, payload in hooks.events:  # every payload is a valid leyline event
        encode_event(make_event(payload, run_id="r", seq=1, ts=0.0, step=0, epoch=0, env=env))


def _ppo_run(data, **over):
    hooks = RecordingHooks()
    config = TrainConfig(**{**TINY, "policy": "ppo", "n_envs": 2, "rounds": 2, "episode_length": 4, "seed": 5, **over})
    return run_training(config, hooks, data=data, sites=NullSites()), hooks


def test_ppo_run_is_deterministic_under_a_seed(data):
    (a, hooks_a), (b, hooks_b) = _ppo_run(data), _ppo_run(data)
    assert [p for _, p in hooks_a.events] == [p for _, p in hooks_b.events]
    assert a.final_accuracy == b.final_accuracy
    updates = hooks_a.of(PPOUpdate)
    assert [p.round for _, p in updates] == [1, 2]
    assert all(set(p.entropy) >= {"op", "slot"} and p.update_epochs >= 1 for _, p in updates)
    (c, hooks_c) = _ppo_run(data, seed=6)
    assert [p for _, p in hooks_c.events] != [p for _, p in hooks_a.events]


def test_level_off_emits_no_metrics(data):
    hooks = RecordingHooks(TelemetryLevel.OFF)
    config = TrainConfig(policy="ppo", n_envs=1, rounds=1, episode_length=3, **TINY)
    run_training(config, hooks, data=data)
    assert not hooks.of(EpochCompleted) and not hooks.of(PPOUpdate)
    assert hooks.epochs == [1, 2, 3]


def test_null_hooks_run_with_default_telemetry(data):
    config = TrainConfig(policy="ppo", n_envs=1, rounds=1, episode_length=2, **TINY)
    summary = run_training(config, NullHooks(TelemetryLevel.NORMAL), data=data)
    assert summary.rounds == 1 and summary.final_accuracy is not None


def test_build_run_wires_one_run_and_a_run_without_checkpoints_refuses_them(tmp_path, data):
    """The composition root the CLI and the benchmarks share: a run without checkpoints has the null
    checkpointer, so ``checkpoint`` and ``stop`` are refused with a reason, and the loop runs the same."""
    import time

    from leyline import CheckpointRequest, Command, EventKind, RunFinished, StopRequest, decode_event
    from trainer.build import build_run, open_run
    from trainer.checkpoint import CheckpointConfig, Checkpointer
    from trainer.checkpoint.null import UNAVAILABLE, NullCheckpointer

    config = TrainConfig(**TINY, rounds=1, episode_length=2, n_envs=1, policy="heuristic", seed=1)
    plain = build_run(config, open_run(config, run_id="plain", log_dir=tmp_path, system_metrics=False))
    assert isinstance(plain.checkpoints, NullCheckpointer)
    for request in (StopRequest(run_id="plain"), CheckpointRequest(run_id="plain")):
        plain.run.runtime.commands.submit(Command(command_id=f"local-{request.action.value}", request=request,
                                              created_at=time.time()))
    summary = plain.train(data=data)
    plain.run.end(summary)
    assert summary.status == "completed" and summary.rounds == 1
    events = [decode_event(line) for line in (tmp_path / "plain" / "events.jsonl").read_bytes().splitlines()]
    for action in ("stop", "checkpoint"):
        said = [e.payload for e in events if e.kind is EventKind.COMMAND_STATUS
                and e.payload.command_id == f"local-{action}"]
        assert said[-1].status.value == "rejected" and said[-1].message == UNAVAILABLE

    kept = build_run(config, open_run(config, run_id="kept", log_dir=tmp_path, system_metrics=False),
                     CheckpointConfig(every=1, keep=1))
    assert isinstance(kept.checkpoints, Checkpointer)
    assert kept.train(data=data).status == "completed" and kept.checkpoints.written
    kept.run.end(RunFinished(status="completed", duration_s=0.0))


def test_the_heuristic_has_no_update_to_profile_and_says_so(tmp_path, data):
    """The heuristic policy is never trained: a profile window of target ``update`` is rejected at once with the
    reason, not armed, opened around an empty update and completed with an empty trace."""
    import time

    from leyline import Command, EventKind, ProfileRequest, decode_event
    from trainer.build import build_run, open_run

    assert TrainConfig(policy="ppo").phases == ("update",) and TrainConfig(policy="heuristic").phases == ()
    config = TrainConfig(**TINY, rounds=1, episode_length=2, n_envs=1, policy="heuristic", seed=1)
    run = build_run(config, open_run(config, run_id="heur", log_dir=tmp_path, system_metrics=False))
    update = ProfileRequest(run_id="heur", target="update")
    run.run.runtime.commands.submit(Command(command_id="local-update", request=update, created_at=time.time()))
    run.run.end(run.train(data=data))
    events = [decode_event(line) for line in (tmp_path / "heur" / "events.jsonl").read_bytes().splitlines()]
    statuses = [e.payload for e in events if e.kind is EventKind.COMMAND_STATUS]
    assert [s.status.value for s in statuses] == ["delivered", "rejected"]
    assert statuses[-1].message.startswith("this run has no phase 'update' (its phases: none)")
    assert not [e for e in events if e.kind in (EventKind.PROFILE_STARTED, EventKind.PROFILE_COMPLETED)]
