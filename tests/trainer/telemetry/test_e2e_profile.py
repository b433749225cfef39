"""nissa-server and esper-train as real processes: ``POST /escalate`` profile on a live run, artifact download."""

from __future__ import annotations

import json
import pathlib

import httpx
import pytest

from leyline import EventKind, ProfileCompleted, decode_events
from tests.e2e.procs import TrainerProcess
from tests.support.server import start_server_process, stop_process
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

TOKEN = "e2e-profile-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
# A run long enough to be profiled mid-way on a loaded machine; it is stopped once the window completed.
TRAIN_ARGS = ["--rounds", "50", "--episode-length", "4", "--n-envs", "1", "--train-size", "512",
              "--val-size", "128", "--batch-size", "64", "--policy", "heuristic", "--seed", "5"]
TERMINAL = ("completed", "failed", "rejected", "expired")


def _command(url: str, command_id: str) -> dict:
    resp = httpx.get(f"{url}/commands/{command_id}", timeout=10)
    resp.raise_for_status()
    return resp.json()


def _escalate(url: str, body: dict) -> str:
    resp = httpx.post(f"{url}/escalate", json=body, headers=AUTH, timeout=10)
    assert resp.status_code == 202, resp.text
    return resp.json()["command_id"]


def _events(url: str, run_id: str, kind: EventKind) -> list:
    resp = httpx.get(f"{url}/runs/{run_id}/events", params={"kind": kind.value, "limit": 1000}, timeout=10)
    resp.raise_for_status()
    return decode_events(resp.content)


def test_profile_escalation_completes_and_its_trace_downloads(tmp_path):
    server, url = start_server_process(tmp_path / "nissa.db", token=TOKEN)
    trainer = TrainerProcess(["--server", url, "--token", TOKEN, "--run-name", "e2e-profile", *TRAIN_ARGS],
                             tmp_path / "runs")
    try:
        run_id = trainer.wait_run_id()
        wait_for(lambda: httpx.get(f"{url}/runs/{run_id}", timeout=5).status_code == 200, 60, message="the run")
        first = _escalate(url, {"run_id": run_id, "action": "profile", "batches": 3, "reason": "e2e"})
        second = _escalate(url, {"run_id": run_id, "action": "profile", "batches": 3})
        record = wait_for(lambda: (c := _command(url, first))["status"] in TERMINAL and c, 120,
                          message="the profile window to finish")
        assert record["status"] == "completed", record
        assert [h["status"] for h in record["history"]] == ["queued", "delivered", "applied", "completed"]
        result = record["result"]
        assert result["batches"] == 3 and result["partial"] is False and result["artifact"]

        other = wait_for(lambda: (c := _command(url, second))["status"] in TERMINAL and c, 120,
                         message="the second request to be answered")
        assert other["status"] in ("completed", "rejected"), other
        if other["status"] == "rejected":  # it arrived while the first window was open
            assert "one window at a time" in other["message"]

        download = httpx.get(f"{url}/runs/{run_id}/artifacts/{result['artifact']}", timeout=30)
        assert download.status_code == 200, download.text[:500]
        local = pathlib.Path(result["trace_path"])
        assert local.is_file() and local.is_relative_to(tmp_path / "runs" / run_id / "profiles")
        assert download.content == local.read_bytes()
        assert any(e.get("name", "").startswith("aten::") for e in json.loads(download.content)["traceEvents"])

        done = wait_for(lambda: [e for e in _events(url, run_id, EventKind.PROFILE_COMPLETED)
                                 if e.payload.command_id == first], 60, message="profile_completed stored")
        payload = done[0].payload
        assert isinstance(payload, ProfileCompleted) and payload.top_ops and payload.artifact == result["artifact"]
        started = [e for e in _events(url, run_id, EventKind.PROFILE_STARTED) if e.payload.command_id == first]
        assert started and "CPU" in started[0].payload.activities
        assert started[0].step == record["applied_step"]

        # A window over the next PPO update: this heuristic run has none (its run_started declares no phase
        # 'update'), so the server refuses it with the reason rather than queue a window that never records.
        # (A PPO run's update window and its trace: tests/trainer/telemetry/test_loop_profile.py.)
        refused = httpx.post(f"{url}/escalate", json={"run_id": run_id, "action": "profile", "target": "update"},
                             headers=AUTH, timeout=30)
        assert refused.status_code == 422 and "no phase 'update'" in refused.json()["detail"], refused.text
    finally:
        trainer.kill()
        stop_process(server)
