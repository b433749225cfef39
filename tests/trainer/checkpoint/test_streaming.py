"""A resumed run streams where it streamed before; a run without a server says so, and how to upload."""

from __future__ import annotations

import json

import pytest

from tests.trainer.test_cli_errors import TINY
from trainer.checkpoint.streaming import SERVER_FILE, previous_server, remember_server
from trainer.cli import main


def test_the_server_is_remembered_and_none_is_none(tmp_path):
    remember_server(tmp_path, "http://127.0.0.1:8765,http://127.0.0.1:8766")
    assert previous_server(tmp_path) == "http://127.0.0.1:8765,http://127.0.0.1:8766"
    remember_server(tmp_path, None)
    assert previous_server(tmp_path) is None


def test_a_run_logged_before_the_file_existed_has_its_server_in_run_started(tmp_path):
    started = {"kind": "run_started", "seq": 1, "payload": {"config": {"server": "http://127.0.0.1:9000"}}}
    (tmp_path / "events.jsonl").write_text(json.dumps(started) + "\n{}\n")
    assert previous_server(tmp_path) == "http://127.0.0.1:9000"


def test_a_hostile_server_file_is_not_read(tmp_path):
    (tmp_path / SERVER_FILE).symlink_to("/dev/zero")
    assert previous_server(tmp_path) is None


@pytest.mark.timeout(120)
def test_a_resume_without_server_goes_on_where_the_run_streamed(tmp_path, capsys):
    """The first run has no server (it says so, and how to upload); its directory is then made to say
    it streamed to one, and the resume, given no --server, announces it streams there."""
    assert main(["--log-dir", str(tmp_path), "--run-id", "r1", *TINY, "--rounds", "1", "--close-timeout", "0"]) == 0
    err = capsys.readouterr().err
    assert "no --server: the run is only logged" in err and f"esper-train upload {tmp_path / 'r1'} --server URL" in err
    remember_server(tmp_path / "r1", "http://127.0.0.1:9")  # nothing listens there: the run keeps its log
    assert main(["--resume", str(tmp_path / "r1"), "--rounds", "2", "--close-timeout", "0"]) == 0
    out = capsys.readouterr().out
    assert "streaming to http://127.0.0.1:9 as before" in out
    assert (tmp_path / "r1" / SERVER_FILE).read_text() == "http://127.0.0.1:9\n"
