"""esper-train as a real process: its run log bracketed by run_started and run_finished, whatever ends it."""

from __future__ import annotations

import signal
import subprocess

import pytest

from leyline import EventKind, decode_event

from .api import wait_for
from .procs import TrainerProcess, log_lines, script

pytestmark = pytest.mark.e2e

LONG = ["--rounds", "50", "--episode-length", "8", "--n-envs", "1", "--train-size", "256", "--val-size", "64",
        "--batch-size", "64", "--policy", "heuristic"]


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 130)])
def test_a_signal_ends_the_run_with_run_finished_interrupted(tmp_path, sig, code):
    trainer = TrainerProcess(["--run-name", "sig", *LONG], tmp_path / "runs")
    try:
        trainer.wait_run_id()
        wait_for(lambda: trainer.log_path.exists() and len(log_lines(trainer.log_path)) >= 2, 60,
                 "training to log its first epoch")
        trainer.proc.send_signal(sig)
        assert trainer.wait(timeout=60) == code, trainer.stderr
    finally:
        trainer.kill()
    events = [decode_event(line) for line in log_lines(trainer.log_path)]
    assert events[0].kind is EventKind.RUN_STARTED
    assert events[-1].kind is EventKind.RUN_FINISHED and events[-1].payload.status == "interrupted"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


def test_help_documents_the_upload_and_bad_flags_are_named():
    shown = subprocess.run([script("esper-train"), "--help"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "esper-train upload" in shown.stdout and "--telemetry-level" in shown.stdout
    bad = subprocess.run([script("esper-train"), "--server", "localhost:8765"], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and "--server" in bad.stderr
    upload = subprocess.run([script("esper-train"), "upload", "/nonexistent-run-dir", "--server", "http://127.0.0.1:9"],
                            capture_output=True, text=True, timeout=60)
    assert upload.returncode == 2 and "no events" in upload.stderr
