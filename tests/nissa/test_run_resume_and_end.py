"""What ``nissa.init`` and ``Run`` offer a loop that counts more than steps (Esper builds its runs through them):
``run.resume`` from a checkpoint, ``run.end`` with the loop's own summary, and init's settings for such loops."""

from __future__ import annotations

import os

import pytest

import nissa
from leyline import EventKind, RunFinished, RunResumed, TelemetryLevel, decode_event
from tests.support.waiting import wait_for


def _events(run: nissa.Run) -> list:
    return [decode_event(line) for line in run.runtime.hub.config.log_path.read_bytes().splitlines()]


def _resumed(step: int, epoch: int) -> RunResumed:
    return RunResumed(checkpoint="round-000001", path="checkpoints/round-000001", round=1, checkpoint_step=step,
                      checkpoint_epoch=epoch, checkpoint_seq=3, pid=os.getpid())


def test_a_resumed_run_goes_on_from_its_checkpoint_with_its_level_and_window(tmp_path):
    first = nissa.init(run_name="r", run_id="resumed", log_dir=tmp_path, system_metrics=False, level="MINIMAL")
    first.step()
    first.runtime.escalate(epochs=5, reason="before the checkpoint")
    first.step()
    assert first.level is TelemetryLevel.DEBUG
    control = first.runtime.control_state()
    first.finish()

    again = nissa.init(run_name="r", run_id="resumed", log_dir=tmp_path, system_metrics=False)
    again.resume(_resumed(step=7, epoch=2), control)
    with pytest.raises(RuntimeError, match="has started already"):
        again.resume(_resumed(step=7, epoch=2), control)
    again.step()
    assert again.current_step == 7 and again.runtime.step == 7  # the checkpoint's step, done again
    assert again.level is TelemetryLevel.DEBUG  # the checkpoint's window, opened again
    again.log({"loss": 0.5})
    again.finish()
    events = _events(again)
    kinds = [e.kind for e in events]
    assert kinds.count(EventKind.RUN_STARTED) == 1 and kinds.count(EventKind.RUN_RESUMED) == 1
    resumed_at = kinds.index(EventKind.RUN_RESUMED)
    assert EventKind.RUN_STARTED not in kinds[resumed_at:]
    assert (events[resumed_at].step, events[resumed_at].epoch) == (7, 2)
    loss = next(e for e in events[resumed_at:] if e.kind is EventKind.METRICS)
    assert loss.step == 7 and loss.payload.values == {"loss": 0.5}
    assert events[-1].kind is EventKind.RUN_FINISHED and events[-1].payload.status == "completed"


def test_end_sends_the_loops_own_summary_once(tmp_path):
    run = nissa.init(run_name="e", log_dir=tmp_path, system_metrics=False)
    run.step()
    report = run.end(RunFinished(status="completed", duration_s=1.5, error="the loop's own"))
    assert run.finished and run.end(RunFinished(status="failed", duration_s=0.0)) is report
    assert run.finish("failed") is report
    finished = [e.payload for e in _events(run) if e.kind is EventKind.RUN_FINISHED]
    assert len(finished) == 1
    assert (finished[0].duration_s, finished[0].error) == (1.5, "the loop's own")
    with pytest.raises(RuntimeError, match="has finished"):
        run.resume(_resumed(step=1, epoch=0), {"level": "NORMAL", "windows": []})


def test_end_before_start_still_begins_the_stream_with_run_started(tmp_path):
    run = nissa.init(run_name="e", log_dir=tmp_path, system_metrics=False)
    run.end(RunFinished(status="failed", duration_s=0.0, error="did not start"))
    assert [e.kind for e in _events(run)][0] is EventKind.RUN_STARTED


def test_init_records_the_device_it_resolved_and_its_hub_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("NISSA_SERVER", "http://127.0.0.1:9")
    run = nissa.init(run_name="d", log_dir=tmp_path, device="auto", server="", heartbeat_s=0.5, system_metrics=False)
    run.start()
    run.finish()
    started = _events(run)[0].payload
    assert started.device == "cpu"  # this machine has no CUDA: auto is the CPU, and the event says so
    assert started.log_dir == str(tmp_path.resolve())
    assert run.runtime.hub.config.server is None  # "" is none, whatever $NISSA_SERVER says
    assert run.runtime.hub.config.heartbeat_s == 0.5


@pytest.mark.parametrize(("kwargs", "error", "names"), [
    ({"envs_per_rank": -1}, ValueError, "envs_per_rank"), ({"envs_per_rank": True}, ValueError, "envs_per_rank"),
    ({"stragglers": {"factor": 2}}, TypeError, "stragglers"), ({"agree": "yes"}, TypeError, "agree"),
    ({"heartbeat_s": 0}, ValueError, "nissa.init: .*heartbeat"),
])
def test_init_names_a_bad_setting(tmp_path, kwargs, error, names):
    with pytest.raises(error, match=names):
        nissa.init(log_dir=tmp_path, **kwargs)
    assert not list(tmp_path.iterdir())  # refused before any run directory was made


def test_a_log_dir_that_cannot_be_written_is_the_os_error_with_a_note(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(OSError) as caught:
        nissa.init(log_dir=blocker, system_metrics=False)
    assert any("log_dir" in note for note in caught.value.__notes__)


def test_ending_a_continued_log_before_its_start_sends_no_second_run_started(tmp_path):
    first = nissa.init(run_name="c", run_id="continued", log_dir=tmp_path, system_metrics=False)
    first.finish()
    again = nissa.init(run_name="c", run_id="continued", log_dir=tmp_path, system_metrics=False)
    again.end(RunFinished(status="interrupted", duration_s=0.0))  # e.g. a SIGTERM before it resumed
    kinds = [e.kind for e in _events(again)]
    assert kinds.count(EventKind.RUN_STARTED) == 1 and kinds.count(EventKind.RUN_FINISHED) == 2


def test_the_stack_watchdog_is_armed_when_the_run_begins_not_before(tmp_path):
    run = nissa.init(run_name="w", log_dir=tmp_path, stack_watchdog_s=300, system_metrics=False)
    stacks = run.run_dir / "stacks"
    assert not stacks.exists()  # a run refused before its start leaves no watchdog file behind
    run.start()
    assert [p.name for p in stacks.iterdir()]
    run.finish()


@pytest.mark.parametrize(("resumed", "control", "error"), [
    ({"round": 1}, {"level": "NORMAL", "windows": []}, TypeError),
    (_resumed(step=1, epoch=0), {"windows": []}, ValueError),
])
def test_resume_names_what_it_was_given_wrong(tmp_path, resumed, control, error):
    run = nissa.init(run_name="r", log_dir=tmp_path, system_metrics=False)
    with pytest.raises(error, match="run.resume"):
        run.resume(resumed, control)
    run.finish()


def test_a_run_that_cannot_be_built_leaves_no_hub_running(tmp_path, monkeypatch):
    import threading

    import nissa.run

    def broken(self, *args, **kwargs):
        raise RuntimeError("cannot build the run")

    monkeypatch.setattr(nissa.run.Run, "__init__", broken)
    before = set(threading.enumerate())  # other tests' hubs may still be closing: only this one's threads count
    with pytest.raises(RuntimeError, match="cannot build"):
        nissa.init(run_name="b", log_dir=tmp_path, system_metrics=False)
    wait_for(lambda: not [t for t in set(threading.enumerate()) - before
                          if t.name.startswith("nissa-hub") and t.is_alive()],
             timeout=30, message="the hub's threads stopped")
