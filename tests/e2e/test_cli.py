"""esper-train as a real process: its run log bracketed by run_started and run_finished, whatever ends it."""

from __future__ import annotations

import signal

import pytest

from leyline import EventKind, decode_event

from .api import wait_for
from .procs import TrainerProcess, log_lines

pytestmark = pytest.mark.e2e

LONG = ["--rounds", "50", "--episode-length", "8", "--n-envs", "1", "--train-size", "256", "--val-size", "64",
        "--batch-size", "64", "--policy", "heuristic"]


def test_sigterm_ends_the_run_with_run_finished_interrupted(tmp_path):
    """SIGTERM (docker stop, a scheduler) ends a run like Ctrl-C: run_finished last, exit code 130."""
    trainer = TrainerProcess(["--run-name", "sig", *LONG], tmp_path / "runs")
    try:
        trainer.wait_run_id()
        wait_for(lambda: trainer.log_path.exists() and len(log_lines(trainer.log_path)) >= 2, 60,
                 "training to log its first epoch")
        trainer.proc.send_signal(signal.SIGTERM)
        assert trainer.wait(timeout=60) == 130, trainer.stderr
    finally:
        trainer.kill()
    assert "nothing to resume from" in trainer.stderr or "esper-train --resume" in trainer.stderr, trainer.stderr
    events = [decode_event(line) for line in log_lines(trainer.log_path)]
    assert events[0].kind is EventKind.RUN_STARTED
    assert events[-1].kind is EventKind.RUN_FINISHED and events[-1].payload.status == "interrupted"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))



def test_a_second_run_with_the_same_run_id_continues_its_log(tmp_path):
    short = ["--rounds", "1", "--episode-length", "2", "--n-envs", "1", "--train-size", "128", "--val-size", "64",
             "--batch-size", "64", "--policy", "heuristic", "--run-id", "resumed-1"]
    for _ in range(2):
        trainer = TrainerProcess(short, tmp_path / "runs")
        try:
            assert trainer.wait(timeout=120) == 0, trainer.stderr
        finally:
            trainer.kill()
        assert trainer.run_id == "resumed-1"
    events = [decode_event(line) for line in log_lines(trainer.log_path)]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [e.kind for e in events].count(EventKind.RUN_STARTED) == 2
    assert events[-1].kind is EventKind.RUN_FINISHED
