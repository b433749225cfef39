"""nissa-server and esper-train as real processes: ``POST /escalate`` profile on a live run, artifact download."""

from __future__ import annotations

import json
import pathlib

import httpx
import pytest

from leyline import EventKind, ProfileCompleted
from tests.e2e.api import command, escalate, run_known, trainer_events, wait_for
from tests.e2e.procs import ServerProcess, TrainerProcess

pytestmark = pytest.mark.e2e

# A run long enough to be profiled mid-way on a loaded machine; it is stopped once the window completed.
TRAIN_ARGS = ["--rounds", "50", "--episode-length", "4", "--n-envs", "1", "--train-size", "512",
              "--val-size", "128", "--batch-size", "64", "--policy", "heuristic", "--seed", "5"]


def test_profile_escalation_completes_and_its_trace_downloads(tmp_path):
    server = ServerProcess(tmp_path / "nissa.db").start()
    trainer = TrainerProcess(["--server", server.url, "--run-name", "e2e-profile", *TRAIN_ARGS], tmp_path / "runs")
    try:
        run_id = trainer.wait_run_id()
        wait_for(lambda: run_known(server.url, run_id), 60, "the run to reach the server")
        queued = escalate(server.url, {"run_id": run_id, "action": "profile", "batches": 3, "reason": "e2e"})
        second = escalate(server.url, {"run_id": run_id, "action": "profile", "batches": 3})
        record = wait_for(lambda: (c := command(server.url, queued["command_id"]))["status"] in
                          ("completed", "failed", "rejected", "expired") and c, 120, "the profile to finish")
        assert record["status"] == "completed", record
        assert [h["status"] for h in record["history"]] == ["queued", "delivered", "applied", "completed"]
        result = record["result"]
        assert result["batches"] == 3 and result["partial"] is False and result["artifact"]

        other = wait_for(lambda: (c := command(server.url, second["command_id"]))["status"] in
                         ("completed", "rejected") and c, 120, "the second request to be answered")
        if other["status"] == "rejected":  # it arrived while the first window was open
            assert "one window at a time" in other["message"]

        url = f"{server.url}/runs/{run_id}/artifacts/{result['artifact']}"
        download = httpx.get(url, timeout=30)
        assert download.status_code == 200, download.text[:500]
        local = pathlib.Path(result["trace_path"])
        assert local.is_file() and local.is_relative_to(tmp_path / "runs" / run_id / "profiles")
        assert download.content == local.read_bytes()
        assert any(e.get("name", "").startswith("aten::") for e in json.loads(download.content)["traceEvents"])

        done = wait_for(lambda: [e for e in trainer_events(server.url, run_id, kind="profile_completed")
                                 if e.payload.command_id == queued["command_id"]], 60, "profile_completed stored")
        payload = done[0].payload
        assert isinstance(payload, ProfileCompleted) and payload.top_ops and payload.artifact == result["artifact"]
        started = trainer_events(server.url, run_id, kind=EventKind.PROFILE_STARTED.value)
        assert started and "CPU" in started[0].payload.activities
    finally:
        trainer.kill()
        server.stop()
