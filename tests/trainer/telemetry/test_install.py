"""Profiling plugged into a real runtime (hub with a local run log): ``--profile`` at start, read back from the log."""

from __future__ import annotations

import pathlib

import torch

from leyline import (
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
from nissa.telemetry.profile_handler import ProfileHandler


def test_profile_at_start_on_a_real_runtime(tmp_path):
    runtime = build_runtime(RuntimeConfig(hub=HubConfig(run_id="prof-run", log_dir=tmp_path),
                                          level=TelemetryLevel.NORMAL))
    handler = install_profiling(runtime, profile_batches=2)
    assert isinstance(runtime.commands.handler(ProfileRequest), ProfileHandler) and handler.busy is False
    model = torch.nn.Linear(16, 4)
    for step in range(1, 7):
        model(torch.randn(8, 16)).sum().backward()
        runtime.step_boundary(step, 1)
    report = runtime.finish(RunFinished(status="completed", duration_s=1.0), timeout=10.0)
    assert report.complete
    lines = (tmp_path / "prof-run" / "events.jsonl").read_bytes().splitlines()
    events = [decode_event(line) for line in lines]
    started = [e for e in events if isinstance(e.payload, ProfileStarted)]
    completed = [e for e in events if isinstance(e.payload, ProfileCompleted)]
    assert len(started) == len(completed) == 1 and started[0].step == 1
    done = completed[0].payload
    assert done.batches == 2 and done.artifact is None  # no server: the trace stays local
    assert pathlib.Path(done.trace_path).parent.parent == tmp_path / "prof-run" / "profiles"
    statuses = [e.payload.status for e in events if isinstance(e.payload, CommandStatusChanged)]
    assert statuses == [CommandStatus.DELIVERED, CommandStatus.APPLIED, CommandStatus.COMPLETED]
