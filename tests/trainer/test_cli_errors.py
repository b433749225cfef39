"""esper-train's bad inputs end with one line that says what is wrong and which flag, never a traceback."""

from __future__ import annotations

import os
import re

import pytest

from trainer.cli import main

TINY = ["--rounds", "1", "--episode-length", "2", "--n-envs", "1", "--train-size", "64", "--val-size", "32",
        "--batch-size", "32", "--policy", "heuristic", "--log-every", "0"]
CIFAR_FILES = ("data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5", "test_batch")


def _one_line_error(capsys, argv: list[str], code: int = 2) -> str:
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == code
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize("where", ["/proc/esper-nope", "a-file", "a-file/below"])
def test_a_log_dir_that_cannot_hold_a_run_log(capsys, tmp_path, monkeypatch, where):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("not a directory")
    err = _one_line_error(capsys, ["--log-dir", where, *TINY])
    assert f"--log-dir {where}: cannot write the run log" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_an_unwritable_log_dir(capsys, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    err = _one_line_error(capsys, ["--log-dir", str(locked), *TINY])
    assert "--log-dir" in err and "ermission denied" in err


def test_a_run_id_whose_log_is_not_a_run_log(capsys, tmp_path):
    (tmp_path / "old-run").mkdir()
    (tmp_path / "old-run" / "events.jsonl").write_text("this is not a run log\n")
    err = _one_line_error(capsys, ["--log-dir", str(tmp_path), "--run-id", "old-run", *TINY])
    assert "--run-id old-run: its existing log cannot be continued" in err


@pytest.mark.parametrize(("argv", "flag"), [
    (["--hub-queue", "0"], "--hub-queue"), (["--close-timeout", "-1"], "--close-timeout"),
    (["--log-every", "-1"], "--log-every"), (["--rounds", "many"], "--rounds"),
    (["--task", "cifar10", "--data-dir", "/nonexistent-cifar"], "--data-dir"),
    (["--straggler-factor", "1"], "--straggler-factor"), (["--rank-timeout", "0"], "--rank-timeout"),
    (["--tag", "has blank"], "--tag"), (["--group", "a/b c"], "--group"), (["--project", "x" * 129], "--project"),
    (["--notes", "n" * 4001], "--notes"), (["--run-id", "a/b"], "--run-id"), (["--run-name", " "], "--run-name"),
    (["--rank-timeout", "inf"], "--rank-timeout"), (["--stack-watchdog", "inf"], "--stack-watchdog"),
])
def test_bad_values_name_their_flag_in_one_line(capsys, tmp_path, argv, flag):
    said = _one_line_error(capsys, ["--log-dir", str(tmp_path), *TINY, *argv])
    assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", said), said  # the flag as spelled: --tag, not --tags


def test_cifar_batches_that_do_not_load_fail_the_run_in_one_line(capsys, tmp_path):
    data = tmp_path / "cifar"
    data.mkdir()
    for name in CIFAR_FILES:
        (data / name).write_bytes(b"not a pickle")
    assert main(["--log-dir", str(tmp_path / "runs"), "--task", "cifar10", "--data-dir", str(data), *TINY]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "esper-train: error: --data-dir: data_batch_1 is not a CIFAR-10 python batch" in err


def test_a_torchrun_world_that_cannot_be_joined_is_one_line(capsys, tmp_path, monkeypatch):
    # torchrun's variables with nobody at MASTER_PORT: the rendezvous times out (--rank-timeout) in one line.
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "9")
    err = _one_line_error(capsys, ["--log-dir", str(tmp_path), "--rank-timeout", "1", *TINY], code=1)
    assert "cannot join the process group (gloo, rank 1 of 2)" in err
