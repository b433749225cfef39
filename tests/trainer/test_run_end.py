"""The lines a run ends with: each rank's named under torchrun, and after Ctrl-C how to go on."""

from __future__ import annotations

import pathlib

from leyline import RunFinished
from nissa.hub import DeliveryReport
from trainer.run_end import end_lines


def _text(lines) -> list[str]:
    return [line for line, _ in lines]


def test_under_torchrun_every_rank_names_itself():
    report = DeliveryReport(logged=10, acked=8, pending=0, server=True)
    done = RunFinished(status="completed", duration_s=1.0)
    lines = [_text(end_lines("r", rank, done, report, pathlib.Path("runs/r"), None)) for rank in (0, 1)]
    assert lines[0][0].startswith("run r rank 0 completed: ") and lines[1][0].startswith("run r rank 1 completed: ")
    assert lines[1][1].startswith("rank 1: not delivered: 2 events")
    assert _text(end_lines("r", None, done, DeliveryReport(logged=10, acked=0, pending=0), pathlib.Path("x"),
                           None)) == ["run r completed: 10 events logged"]


def test_an_interrupted_run_says_how_to_go_on(tmp_path):
    stopped = RunFinished(status="interrupted", duration_s=1.0)
    report = DeliveryReport(logged=3, acked=0, pending=0)
    assert _text(end_lines("r", None, stopped, report, tmp_path, None))[-1] == (
        "no checkpoint was written before the interrupt: there is nothing to resume from")
    (tmp_path / "checkpoints" / "round-000001").mkdir(parents=True)
    (tmp_path / "checkpoints" / "round-000001" / "rank0.json").write_text("{}")
    hint = end_lines("r", None, stopped, report, tmp_path, None)[-1]
    assert hint == (f"to go on from its last checkpoint: esper-train --resume {tmp_path}", True)
    assert len(end_lines("r", 1, stopped, report, tmp_path, None)) == 1  # rank 0 says it for the run
