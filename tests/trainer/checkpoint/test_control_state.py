"""The telemetry level and open DEBUG windows go into a checkpoint and come back on resume (a real hub)."""

from __future__ import annotations

from leyline import EventKind, RunResumed, TelemetryLevel, decode_event
from nissa.hub import HubConfig
from nissa.runtime import RuntimeConfig, build_runtime


def test_open_windows_and_the_level_are_reopened_on_resume(tmp_path):
    before = build_runtime(RuntimeConfig(hub=HubConfig(run_id="a", log_dir=tmp_path), level=TelemetryLevel.MINIMAL))
    before.escalate(epochs=3, reason="a window")
    before.step_boundary(1, 1)
    before.epoch_end(1)
    state = before.control_state()
    assert state == {"level": "MINIMAL", "windows": [
        {"key": state["windows"][0]["key"], "through_update": False, "epochs": 2}]}
    before.hub.close(5)

    after = build_runtime(RuntimeConfig(hub=HubConfig(run_id="b", log_dir=tmp_path), level=TelemetryLevel.NORMAL))
    announce = RunResumed(checkpoint="round-000001", path="p", round=1, checkpoint_step=10, checkpoint_epoch=4)
    after.resume_at(10, 4, state, announce)
    after.step_boundary(11, 5)
    assert after.level is TelemetryLevel.DEBUG and after.levels.base is TelemetryLevel.MINIMAL
    after.hub.close(5)
    events = [decode_event(line) for line in after.hub.log_path.read_bytes().splitlines()]
    assert events[0].kind is EventKind.RUN_RESUMED and (events[0].step, events[0].epoch) == (10, 4)
    assert events[1].kind is EventKind.TELEMETRY_LEVEL_CHANGED and events[1].payload.level is TelemetryLevel.MINIMAL
    reopened = [e for e in events if e.kind is EventKind.COMMAND_STATUS]
    assert reopened and "resumed: window" in reopened[0].payload.message


def test_of_several_ranks_only_rank_0_reopens_a_window(tmp_path):
    """The ranks' agreement carries rank 0's reopened window to the others; each rank reopening its own would
    open one window per rank on every rank."""
    from ranks import Ranks

    state = {"level": "NORMAL", "windows": [{"key": "w1", "through_update": False, "epochs": 2}]}
    announce = RunResumed(checkpoint="round-000001", path="p", round=1, checkpoint_step=10, checkpoint_epoch=4)
    held = {}
    for rank in (0, 1):
        runtime = build_runtime(RuntimeConfig(hub=HubConfig(run_id="r", log_dir=tmp_path / str(rank), rank=rank),
                                              ranks=Ranks(rank=rank, world_size=2)))
        runtime.resume_at(10, 4, state, announce)
        held[rank] = [c.reason for c in runtime.commands.take_held()]
        runtime.hub.close(5)
    assert held == {0: ["resumed: window w1"], 1: []}
