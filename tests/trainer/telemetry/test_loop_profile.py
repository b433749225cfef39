"""Profile windows on the real loop with the real runtime: every trace carries the phases it covers,
and a window can target the next PPO update. Traces are read back from the exported JSON."""

from __future__ import annotations

import json
import pathlib
import time

import pytest

from leyline import (
    Command,
    CommandStatus,
    CommandStatusChanged,
    ProfileCompleted,
    ProfileRequest,
    ProfileStarted,
    RunFinished,
    TelemetryLevel,
    decode_event,
)
from nissa.hub import HubConfig
from nissa.runtime import RuntimeConfig, build_runtime
from nissa.telemetry.install import install_profiling
from nissa.telemetry.phases import PHASES
from tests.trainer.telemetry.test_loop_telemetry import CommandAt
from trainer.build import run_training
from trainer.simic.config import TrainConfig
from trainer.telemetry.install import telemetry_for_training

# 4 batches an epoch, 3 epochs a round, then the PPO update.
TINY = dict(device="cpu", policy="ppo", n_envs=1, episode_length=3, train_size=256, val_size=64, batch_size=64,
            log_every=0, lstm_hidden=8, base_channels=4, seed=2)
pytestmark = pytest.mark.usefixtures("one_thread")


def _profile(cid: str, **kw) -> Command:
    return Command(command_id=cid, request=ProfileRequest(run_id="r", **kw))


def _run(tmp_path: pathlib.Path, name: str, plan: dict[int, Command], rounds: int = 1,
         profile_update: bool = False) -> list:
    runtime = build_runtime(RuntimeConfig(hub=HubConfig(run_id=name, log_dir=tmp_path), level=TelemetryLevel.NORMAL))
    install_profiling(runtime, profile_update=profile_update)
    hooks = CommandAt(runtime, plan)
    config = TrainConfig(rounds=rounds, **TINY)
    start = time.perf_counter()
    run_training(config, hooks, sites=telemetry_for_training(hooks, config))
    assert runtime.finish(RunFinished(status="completed", duration_s=time.perf_counter() - start)).complete
    return [decode_event(line) for line in (tmp_path / name / "events.jsonl").read_bytes().splitlines()]


def _trace(events: list, cid: str | None = None) -> tuple[ProfileCompleted, set[str], set[str]]:
    """The completed window's payload, the loop's phase ranges in its trace, and its operator names."""
    done = [e.payload for e in events if isinstance(e.payload, ProfileCompleted)
            and (cid is None or e.payload.command_id == cid)]
    assert len(done) == 1, done
    trace = json.loads(pathlib.Path(done[0].trace_path).read_text())["traceEvents"]
    ranges = {e["name"] for e in trace if e.get("cat") == "user_annotation"} & set(PHASES)
    ops = {e["name"] for e in trace if e.get("cat") == "cpu_op"}
    return done[0], ranges, ops


def test_a_window_inside_one_phase_still_carries_it(tmp_path):
    # Opened at the first batch boundary of epoch 2, two batches long: it starts and ends inside `train`.
    events = _run(tmp_path, "inside", {2: _profile("in", batches=2)})
    done, ranges, ops = _trace(events, "in")
    assert done.batches == 2 and done.target == "batches"
    assert ranges == {"train"}, ranges
    assert "aten::convolution" in ops


def test_a_window_across_an_epoch_end_carries_every_phase_it_covers(tmp_path):
    # Opened at the first boundary of epoch 1 (step 1): warm-up is batch 2, batches 3..7 recorded.
    events = _run(tmp_path, "across", {1: _profile("x", batches=5)})
    _, ranges, _ = _trace(events, "x")
    assert {"train", "validation", "rollout", "action"} <= ranges, ranges


def test_a_window_can_target_the_next_ppo_update(tmp_path):
    events = _run(tmp_path, "update", {1: _profile("u", target="update")}, rounds=2)
    done, ranges, ops = _trace(events, "u")
    assert done.target == "update" and done.batches == 0
    assert ranges == {"ppo_update"}, ranges
    assert any("lstm" in op for op in ops), "the policy's forward and backward are in the trace"
    started = next(e for e in events if isinstance(e.payload, ProfileStarted) and e.payload.command_id == "u")
    applied = next(e for e in events if isinstance(e.payload, CommandStatusChanged) and e.payload.command_id == "u"
                   and e.payload.status is CommandStatus.APPLIED)
    assert applied.payload.applied_step == 1 and started.payload.target == "update"
    assert started.epoch == 3, "armed at step 1, started at the first update (after epoch 3)"


def test_profile_update_flag_records_the_first_update(tmp_path):
    events = _run(tmp_path, "flag", {}, profile_update=True)
    done, ranges, _ = _trace(events)
    assert done.target == "update" and ranges == {"ppo_update"}
