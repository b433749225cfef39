"""esper-train's command line: documented upload, flags named in errors, run ids that fit the contract."""

from __future__ import annotations

import msgspec
import pytest

from leyline.events import RunId
from nissa.join import new_run_id
from trainer.cli import main


def test_help_documents_the_upload(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0
    assert "esper-train upload" in out and "--telemetry-level" in out and "--server" in out and "--profile" in out
    assert "--profile-update" in out


@pytest.mark.parametrize(("argv", "flag"), [
    (["--server", "localhost:8765"], "--server"),
    (["--profile", "0"], "--profile"),
    (["--n-envs", "0"], "--n-envs"),
    (["--telemetry-level", "LOUD"], "--telemetry-level"),
    (["--run-id", "../etc"], "--run-id"),
    (["--run-id", ".."], "--run-id"),
    (["--run-id", "."], "--run-id"),
    (["--token", "tökén"], "--token"),
    (["--run-name", "x" * 300], "run name"),
    (["--run-name", " "], "--run-name: must not be empty"),
    (["upload", "/nonexistent-run-dir", "--server", "http://127.0.0.1:9"], "no events"),
    (["upload", "some-dir"], "--server"),
])
def test_bad_input_exits_2_and_names_the_flag(capsys, monkeypatch, argv, flag):
    monkeypatch.delenv("NISSA_SERVER", raising=False)
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    assert flag in capsys.readouterr().err


@pytest.mark.parametrize("name", ["demo", "my run/with spaces", "ünïcode", "", "x" * 300, "../../etc"])
def test_run_ids_are_valid_leyline_run_ids_and_unique(name):
    ids = {new_run_id(name) for _ in range(20)}
    assert len(ids) == 20
    for run_id in ids:
        msgspec.convert(run_id, RunId)
        assert "/" not in run_id and not run_id.startswith(".")


def test_a_dot_run_id_writes_nothing_anywhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit):
        main(["--run-id", "..", "--log-dir", str(tmp_path / "logs" / "inner")])
    assert list(tmp_path.iterdir()) == []
