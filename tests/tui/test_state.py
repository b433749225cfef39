"""RunState folds events into bounded panels; views change only when their data does."""

import pytest

from leyline import (
    CommandAction,
    CommandStatus,
    CommandStatusChanged,
    Heartbeat,
    RunFinished,
    TelemetryLevel,
    make_event,
)
from leyline.esper import EpochCompleted
from tests.tui.scenario import scripted_run
from tui.state import RunState
from tui.state_rows import Limits
from tui.views import StaleThresholds, command_rows, env_rows, header_view, ppo_view, staleness


def test_scripted_run_fills_every_panel():
    state = RunState("demo-run")
    state.apply_all(scripted_run())
    assert state.name == "cifar-esper" and state.status == "finished"
    assert state.epoch == 24 and state.round == 6
    assert sorted(state.envs) == [0, 1, 2, 3]
    assert len(state.ppo) == 6 and set(state.grad) == {"host", "policy"}
    assert state.anomalies[0].payload.anomaly == "kl_spike"
    assert state.level is TelemetryLevel.NORMAL  # the DEBUG window went back by itself
    assert state.profile is not None and state.profile.top_ops[0].name == "aten::conv2d"
    cmd = state.commands["cmd-7f3a"]
    assert cmd.status is CommandStatus.COMPLETED and cmd.applied_step is not None
    assert state.gaps == 0 and state.duplicates == 0
    assert state.env_epochs_per_s is not None


def test_duplicates_are_skipped_and_gaps_counted():
    events = scripted_run(epochs=2, finish=False)
    state = RunState("demo-run")
    state.apply_all(events[:5] + events[3:5] + events[7:])
    assert state.duplicates == 2
    assert state.gaps == 2
    assert state.events_total == len(events) - 2


def test_buffers_stay_within_their_limits_under_a_long_run():
    limits = Limits(log_lines=50, history=10, timeline=7, anomalies=3, commands=2, envs=2)
    state = RunState("demo-run", limits)
    state.apply_all(scripted_run(epochs=80, envs=4))
    assert len(state.log) == 50 and state.logged_total > 50
    assert len(state.timeline) == 7 and len(state.envs) == 2
    assert all(len(v.accuracy) <= 10 for v in state.envs.values())
    assert len(state.ppo) == 10 and len(state.lstm) == 10
    for i in range(5):
        state.command_issued(f"c{i}", CommandAction.DEBUG)
    assert len(state.commands) <= 2


def test_a_late_report_does_not_move_a_command_backwards():
    state = RunState("r")
    state.command_issued("c1", CommandAction.DEBUG)
    for seq, status in enumerate((CommandStatus.APPLIED, CommandStatus.COMPLETED, CommandStatus.DELIVERED), 1):
        state.apply(make_event(CommandStatusChanged(command_id="c1", action=CommandAction.DEBUG, status=status,
                                                    applied_step=40 if status is CommandStatus.APPLIED else None),
                               run_id="r", seq=seq, ts=1.0, rank=-1))
    view = state.commands["c1"]
    assert view.status is CommandStatus.COMPLETED and view.applied_step == 40
    row = command_rows(state)[0]
    assert [s for s, _ in row.path] == ["queued", "applied", "completed", "delivered"]


def test_views_compare_equal_when_nothing_changed():
    state = RunState("demo-run")
    state.apply_all(scripted_run(epochs=8))
    assert env_rows(state) == env_rows(state) and ppo_view(state) == ppo_view(state)
    before = env_rows(state)
    state.apply(make_event(Heartbeat(uptime_s=9.0), run_id="demo-run", seq=10_000, ts=2e9))
    assert env_rows(state) == before
    state.apply(make_event(EpochCompleted(accuracy=0.99, val_loss=0.1), run_id="demo-run", seq=10_001, ts=2e9, env=0))
    assert env_rows(state) != before


@pytest.mark.parametrize(("silence", "status", "expected"), [
    (None, "live", "WAITING"), (1.0, "live", "LIVE"), (6.0, "live", "SLOW"), (60.0, "live", "STALE"),
    (1.0, "lost", "LOST"), (None, "lost", "LOST"),
    (60.0, "finished", "FINISHED"), (60.0, "interrupted", "FINISHED"), (60.0, "failed", "FINISHED"),
    (60.0, "lost", "LOST"), (60.0, "a-status-from-a-newer-server", "STALE"),
])
def test_staleness(silence, status, expected):
    assert staleness(silence, status, StaleThresholds(slow_s=5, stale_s=15)) == expected


@pytest.mark.parametrize(("ending", "status"), [("completed", "finished"), ("interrupted", "interrupted"),
                                                ("failed", "failed")])
def test_run_finished_sets_the_status_the_server_gives(ending, status):
    state = RunState("run")
    state.apply(make_event(RunFinished(status=ending, duration_s=1.0), run_id="run", seq=1, ts=1.7e9))
    assert state.status == status


def test_config_validation():
    with pytest.raises(ValueError):
        Limits(log_lines=0)
    with pytest.raises(ValueError):
        StaleThresholds(slow_s=10, stale_s=5)


def test_header_view_reports_hub_health():
    state = RunState("demo-run")
    state.apply_all(scripted_run(epochs=8))
    view = header_view(state, "connected", "LIVE", 0)
    assert view.hub_queue is not None and view.hub_reconnects == 0 and view.rate is not None


def test_a_loops_metric_steps_are_folded_into_a_count_and_other_events_keep_their_lines():
    from leyline import Metrics, RunStarted, make_event

    state = RunState("loop-run")
    events = [make_event(RunStarted(name="loop", config={}), run_id="loop-run", seq=1, ts=1.0)]
    events += [make_event(Metrics(values={"loss": 1.0 / s}), run_id="loop-run", seq=s + 1, ts=1.0 + s, step=s)
               for s in range(1, 40)]
    for event in events:
        state.apply(event)
    assert state.metric_steps == 39 and state.events_total == 40
    assert len(state.log) == 1 and "loop" in state.log[0].plain, "run_started keeps its line"


def test_a_window_that_recorded_no_operator_does_not_hide_the_last_useful_one():
    from leyline import ProfileCompleted, ProfileStarted, TopOp

    def completed(seq, window, ops):
        return make_event(ProfileCompleted(window=window, batches=0, trace_path=f"/t/{window}.json", wall_s=0.1,
                                           top_ops=ops, target="update"), run_id="r", seq=seq, ts=1.7e9 + seq)

    useful = [TopOp(name="aten::addmm", calls=3, cpu_time_us=5000.0, self_cpu_time_us=4000.0)]
    state = RunState("r")
    state.apply_all([completed(1, "w1-update3", useful),
                     make_event(ProfileStarted(window="w2-update9", batches=0, trace_dir="/t", activities=["cpu"],
                                               target="update"), run_id="r", seq=2, ts=1.7e9 + 2),
                     completed(3, "w2-update9", [])])
    assert state.profile is not None and state.profile.window == "w1-update3" and state.profile_running is None
    state.apply_all([completed(4, "w3-update12", useful)])
    assert state.profile.window == "w3-update12"
