"""examples/plain_loop.py on two ranks under torchrun (gloo, CPU) through a real nissa-server: one run, its own
``set_lr`` applied at one agreed step on both ranks, a profile window giving a trace per rank, and ``stop``
ending both."""

from __future__ import annotations

import subprocess

import httpx
import pytest

from .api import command, escalate, run_known, wait_for
from .procs import ServerProcess, _env, script
from .test_plain_loop import EXAMPLE

pytestmark = pytest.mark.e2e


def _completed(url: str, command_id: str) -> dict:
    return wait_for(lambda: (c := command(url, command_id))["status"] in ("completed", "failed", "rejected") and c,
                    90, f"command {command_id}")


def test_two_ranks_apply_the_run_own_command_at_the_same_step(tmp_path):
    server = ServerProcess(tmp_path / "nissa.db").start()
    out = open(tmp_path / "torchrun.out", "w+")
    proc = subprocess.Popen([script("torchrun"), "--standalone", "--nproc-per-node", "2", str(EXAMPLE),
                             "--server", server.url, "--steps", "100000", "--step-delay", "0.005",
                             "--log-dir", str(tmp_path / "runs")], stdout=out, stderr=subprocess.STDOUT, env=_env())
    try:
        def run_id() -> str | None:
            out.seek(0)
            return next((line.split(": ", 1)[1].strip() for line in out if line.startswith("run id: ")), None)

        rid = wait_for(run_id, 120, "the run id")
        wait_for(lambda: run_known(server.url, rid), 60, "the run on the server")
        wait_for(lambda: httpx.get(f"{server.url}/runs/{rid}", timeout=10).json()["world_size"] == 2, 60,
                 "both ranks")
        call = _completed(server.url, escalate(server.url, {"run_id": rid, "action": "call", "name": "set_lr",
                                                            "args": {"value": 0.02}})["command_id"])
        assert call["status"] == "completed", call
        assert [r["status"] for r in call["ranks"]] == ["completed", "completed"]
        assert len({r["applied_step"] for r in call["ranks"]}) == 1
        assert [r["result"] for r in call["ranks"]] == [{"lr": 0.02}, {"lr": 0.02}]
        profile = _completed(server.url, escalate(server.url, {"run_id": rid, "action": "profile",
                                                               "batches": 2})["command_id"])
        assert profile["status"] == "completed", profile
        names = {a["name"] for a in httpx.get(f"{server.url}/runs/{rid}/artifacts", timeout=10).json()}
        assert len(names) == 2 and any("rank1" in n for n in names), names
        stop = escalate(server.url, {"run_id": rid, "action": "stop"})
        assert proc.wait(timeout=120) == 0
        assert _completed(server.url, stop["command_id"])["status"] == "completed"
        assert httpx.get(f"{server.url}/runs/{rid}", timeout=10).json()["status"] == "stopped"
        metrics = wait_for(lambda: {"loss{rank=0}", "loss{rank=1}"} <= set(
            m := httpx.get(f"{server.url}/runs/{rid}", timeout=10).json()["metrics"]) and m, 30, "each rank's loss")
        assert "loss" not in metrics, "a run of two ranks keeps each rank's label"
        keys = {s["key"] for s in httpx.get(f"{server.url}/runs/{rid}/series/loss", timeout=10).json()["series"]}
        assert keys == {"loss{rank=0}", "loss{rank=1}"}
    finally:
        if proc.poll() is None:
            proc.kill()
        out.close()
        server.stop()
