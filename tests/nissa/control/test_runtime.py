"""The runtime hooks over a real hub (log only): stamping, escalation through the log, run end."""

from __future__ import annotations

from leyline import CommandStatus, EventKind, RunFinished, TelemetryLevel, decode_event
from leyline.esper import EpochCompleted, EsperKind
from nissa.hub import HubConfig
from nissa.runtime import Runtime, RuntimeConfig, build_runtime
from trainer.hooks import RunHooks


def read_log(path):
    return [decode_event(line) for line in path.read_bytes().splitlines()]


def test_runtime_is_the_hooks_the_loop_calls_and_logs_a_whole_escalation(tmp_path):
    runtime: RunHooks = build_runtime(RuntimeConfig(hub=HubConfig(run_id="rt", log_dir=tmp_path),
                                                    level=TelemetryLevel.MINIMAL))
    assert isinstance(runtime, Runtime)
    runtime.escalate(epochs=1, reason="auto: test")
    step = 0
    for epoch in (1, 2):
        for _ in range(3):
            step += 1
            runtime.step_boundary(step, epoch)
        runtime.emit(EpochCompleted(accuracy=0.5, val_loss=1.0), env=0)
        if epoch == 1:
            assert runtime.level is TelemetryLevel.DEBUG
        runtime.epoch_end(epoch)
    assert runtime.level is TelemetryLevel.MINIMAL
    report = runtime.finish(RunFinished(status="completed", duration_s=1.0), timeout=10)
    events = read_log(runtime.hub.log_path)
    assert report.logged == len(events) and report.complete
    assert events[-1].kind is EventKind.RUN_FINISHED and events[-1].step == 6
    statuses = [(e.payload.status, e.payload.applied_step) for e in events if e.kind is EventKind.COMMAND_STATUS]
    assert statuses == [(CommandStatus.DELIVERED, None), (CommandStatus.APPLIED, 1), (CommandStatus.COMPLETED, 1)]
    levels = [(e.payload.level, e.step) for e in events if e.kind is EventKind.TELEMETRY_LEVEL_CHANGED]
    assert levels == [(TelemetryLevel.DEBUG, 1), (TelemetryLevel.MINIMAL, 3)]
    epochs = [(e.step, e.epoch) for e in events if e.kind is EsperKind.EPOCH_COMPLETED]
    assert epochs == [(3, 1), (6, 2)]
