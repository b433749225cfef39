"""esper-train's checkpoint flags: a run resumed in-process goes on as the same run; bad flags, a changed
training config or a damaged checkpoint are one line naming the flag, never a traceback."""

from __future__ import annotations

import json

import pytest

from tests.trainer.test_cli_errors import TINY, _one_line_error
from trainer.cli import main


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A two-round run with a checkpoint after each round."""
    log_dir = tmp_path_factory.mktemp("runs")
    assert main(["--log-dir", str(log_dir), "--run-id", "ckpt-run", *TINY, "--rounds", "2"]) == 0
    return log_dir / "ckpt-run"


@pytest.mark.parametrize(("argv", "flag"), [
    (["--checkpoint", "round-000001"], "--checkpoint: only with --resume"),
    (["--keep-checkpoints", "0"], "--keep-checkpoints: must be an integer >= 1"),
    (["--checkpoint-every", "-1"], "--checkpoint-every: must be an integer >= 0"),
    (["--resume", "/nonexistent/run"], "--resume /nonexistent/run: no checkpoints there"),
])
def test_bad_checkpoint_flags(capsys, argv, flag):
    assert flag in _one_line_error(capsys, [*TINY, *argv])


def test_resume_refuses_another_training_config_and_a_spent_round_count(capsys, finished_run):
    err = _one_line_error(capsys, ["--resume", str(finished_run), "--rounds", "3", "--seed", "9"])
    assert "--seed: the checkpoint was taken with 0, not 9" in err
    err = _one_line_error(capsys, ["--resume", str(finished_run), "--rounds", "2"])
    assert "--rounds 2: checkpoint round-000002 already holds 2 rounds" in err
    err = _one_line_error(capsys, ["--resume", str(finished_run), "--run-id", "other", "--rounds", "3"])
    assert "--run-id other: a resumed run keeps its id" in err


def test_resume_goes_on_with_the_same_log(capsys, finished_run, tmp_path):
    log = finished_run / "events.jsonl"
    before = log.read_bytes().splitlines()
    assert main(["--resume", str(finished_run), "--rounds", "3"]) == 0
    out = capsys.readouterr().out
    assert "run id: ckpt-run" in out and "resumed from" in out and "last checkpoint:" in out
    lines = [json.loads(line) for line in log.read_bytes().splitlines()]
    assert [e["seq"] for e in lines] == list(range(1, len(lines) + 1)) and len(lines) > len(before)
    resumed = [e for e in lines if e["kind"] == "run_resumed"]
    assert len(resumed) == 1 and resumed[0]["payload"]["round"] == 2
    assert resumed[0]["payload"]["checkpoint_seq"] <= len(before)
    # Esper's results are the run's summaries, set just before the generic end (status, duration, error).
    assert lines[-1]["kind"] == "run_finished" and set(lines[-1]["payload"]) == {"status", "duration_s", "error"}
    summary = {k: v for e in lines[len(before):] if e["kind"] == "summary" for k, v in e["payload"]["values"].items()}
    assert summary["rounds"] == 3 and set(summary) == {"final_accuracy", "best_accuracy", "fossilized", "pruned",
                                                       "rounds"}


def test_resume_of_the_current_directory_is_that_run(capsys, finished_run, monkeypatch):
    """``--resume .`` inside the run directory is that run (its name is the run id), not a new run."""
    runs_before = sorted(p.name for p in finished_run.parent.iterdir())
    monkeypatch.chdir(finished_run)
    err = _one_line_error(capsys, ["--resume", ".", "--rounds", "1"])
    assert "--rounds 1: checkpoint round-00000" in err and "already holds" in err
    assert sorted(p.name for p in finished_run.parent.iterdir()) == runs_before


@pytest.mark.parametrize("name", ["ABS", "round-000001/../round-000001"])
def test_a_checkpoint_given_as_a_path_is_one_line(capsys, finished_run, name):
    name = str(finished_run / "checkpoints" / "round-000001") if name == "ABS" else name
    err = _one_line_error(capsys, ["--resume", str(finished_run), "--checkpoint", name, "--rounds", "3"])
    assert f"--checkpoint {name}: a checkpoint's name, round-NNNNNN" in err
