"""nissa-server and esper-train as real processes: a live run, an escalation, a gap-free store."""

from __future__ import annotations

import httpx
import pytest

from leyline import EventKind, TelemetryLevel

from .api import command, escalate, run_known, trainer_events, wait_for
from .procs import ServerProcess, TrainerProcess, log_lines

pytestmark = pytest.mark.e2e

# Long enough to escalate mid-run on a loaded machine, short enough for CI (a few seconds).
TRAIN_ARGS = ["--rounds", "1", "--episode-length", "6", "--n-envs", "1", "--train-size", "256",
              "--val-size", "128", "--batch-size", "64", "--policy", "heuristic", "--seed", "3"]


def test_live_run_escalation_and_gap_free_store(tmp_path):
    server = ServerProcess(tmp_path / "nissa.db").start()
    trainer = TrainerProcess(["--server", server.url, "--run-name", "e2e", *TRAIN_ARGS], tmp_path / "runs")
    try:
        run_id = trainer.wait_run_id()
        wait_for(lambda: run_known(server.url, run_id), 60, "the run to reach the server")
        queued = escalate(server.url, {"run_id": run_id, "action": "debug", "epochs": 1, "reason": "e2e"})
        assert queued["status"] == "queued"
        assert trainer.wait(timeout=120) == 0, trainer.stderr
        local = log_lines(trainer.log_path)
        stored = trainer_events(server.url, run_id)
        assert [e.seq for e in stored] == list(range(1, len(local) + 1))
        assert stored[0].kind is EventKind.RUN_STARTED and stored[-1].kind is EventKind.RUN_FINISHED

        record = wait_for(lambda: (c := command(server.url, queued["command_id"]))["status"] == "completed" and c,
                          30, "the command to complete")
        history = [h["status"] for h in record["history"]]
        assert history == ["queued", "delivered", "applied", "completed"]
        assert isinstance(record["applied_step"], int) and record["applied_step"] > 0

        levels = [(e.payload.previous, e.payload.level) for e in stored
                  if e.kind is EventKind.TELEMETRY_LEVEL_CHANGED]
        assert levels == [(TelemetryLevel.NORMAL, TelemetryLevel.DEBUG), (TelemetryLevel.DEBUG, TelemetryLevel.NORMAL)]
        assert any(line.startswith(f"run {run_id} completed") for line in trainer.lines)
        health = httpx.get(f"{server.url}/runs/{run_id}", timeout=10).json()["hub_health"]
        assert health["logged"] >= 1 and health["connected"] is True and health["dropped"] == {}
    finally:
        trainer.kill()
        server.stop()
