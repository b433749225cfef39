"""A token the server refuses stops esper-train at its start, in one line, before any training."""

from __future__ import annotations

import json

from tests.support import running_server
from tests.trainer.test_cli_errors import TINY, _one_line_error
from trainer.cli import main


def test_a_wrong_token_is_refused_at_the_start_once(capsys, tmp_path):
    runs = tmp_path / "runs"
    with running_server(tmp_path, token="right") as served:
        url = str(served)
        err = _one_line_error(capsys, ["--server", url, "--token", "wrong", "--log-dir", str(runs), "--run-id", "t",
                                       *TINY])
        assert f"--server {url} refused this run's stream at its start" in err and "4401" in err, err
        assert "--token or NISSA_TOKEN" in err
        logged = [json.loads(line) for line in (runs / "t" / "events.jsonl").read_bytes().splitlines()]
        assert [e["kind"] for e in logged if e["kind"] in ("epoch_completed", "run_started")] == []
        assert main(["--server", url, "--token", "right", "--log-dir", str(runs), "--run-id", "t2", *TINY]) == 0
    out, err = capsys.readouterr()
    assert "streaming to " + url in out and "refused" not in err
