"""examples/plain_loop.py against a real nissa-server: its metrics stored and read back as a series, a debug
window over the watched model, profile windows over its steps and over its own phase, its own ``set_lr``
command checked by the server and applied, and ``stop``."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import threading

import httpx
import pytest

from leyline import EventKind

from .api import command, escalate, run_known, trainer_events, wait_for
from .procs import ServerProcess, _env

pytestmark = pytest.mark.e2e
EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "plain_loop.py"


class LoopProcess:
    """The example as a subprocess; its first line names the run."""

    def __init__(self, args: list[str]) -> None:
        self.proc = subprocess.Popen([sys.executable, str(EXAMPLE), *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=_env())
        self.lines: list[str] = []
        self._named = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            self._named.set()

    def run_id(self) -> str:
        assert self._named.wait(60), \
            f"the example printed nothing: {self.proc.stderr.read() if self.proc.stderr else ''}"
        return self.lines[0].removeprefix("run id: ")


def _done(url: str, command_id: str) -> dict:
    return wait_for(lambda: (c := command(url, command_id))["status"] in ("completed", "failed", "rejected") and c,
                    60, f"command {command_id} to finish")


def test_plain_loop_is_watched_and_steered(tmp_path):
    server = ServerProcess(tmp_path / "nissa.db").start()
    loop = LoopProcess(["--server", server.url, "--steps", "100000", "--step-delay", "0.002",
                        "--validate-every", "5", "--log-dir", str(tmp_path / "runs")])
    try:
        run_id = loop.run_id()
        wait_for(lambda: run_known(server.url, run_id), 60, "the run to reach the server")
        # The run exists from its stream's hello; what it declared comes with its run_started, just after.
        declared = wait_for(lambda: httpx.get(f"{server.url}/runs/{run_id}", timeout=10).json()["commands"], 30,
                            "the run's declared commands")
        assert declared[0]["name"] == "set_lr" and declared[0]["args"][0] == {
            "name": "value", "type": "float", "help": "", "required": True, "default": None}

        for bad, reason in [({"name": "nope"}, "declared no command 'nope'"),
                            ({"name": "set_lr", "args": {"value": "fast"}}, "must be a finite float"),
                            ({"name": "set_lr", "args": {}}, "needs argument 'value'")]:
            resp = httpx.post(f"{server.url}/escalate", json={"run_id": run_id, "action": "call", **bad}, timeout=10)
            assert resp.status_code == 422 and reason in resp.text, resp.text
        # The loop declared its one phase, `validate`: a window over an `update` it does not have is refused.
        resp = httpx.post(f"{server.url}/escalate", timeout=10,
                          json={"run_id": run_id, "action": "profile", "target": "update"})
        assert resp.status_code == 422 and "no phase 'update' (its phases: validate)" in resp.text, resp.text

        debug = _done(server.url,
                      escalate(server.url, {"run_id": run_id, "action": "debug", "epochs": 3})["command_id"])
        steps = _done(server.url,
                      escalate(server.url, {"run_id": run_id, "action": "profile", "batches": 2})["command_id"])
        phase = _done(server.url, escalate(server.url, {"run_id": run_id, "action": "profile", "target": "update",
                                                        "phase": "validate"})["command_id"])
        set_lr = _done(server.url, escalate(server.url, {"run_id": run_id, "action": "call", "name": "set_lr",
                                                         "args": {"value": 0.01}})["command_id"])
        for record in (debug, steps, phase, set_lr):
            assert record["status"] == "completed", record
        assert set_lr["result"] == {"lr": 0.01} and set_lr["request"]["name"] == "set_lr"
        assert phase["result"]["window"].endswith(f"validate{phase['applied_step']}")
        stop = escalate(server.url, {"run_id": run_id, "action": "stop"})
        assert loop.proc.wait(timeout=120) == 0
        assert _done(server.url, stop["command_id"])["result"]["path"].endswith(".pt")

        info = httpx.get(f"{server.url}/runs/{run_id}", timeout=10).json()
        assert info["status"] == "stopped"
        events = trainer_events(server.url, run_id)
        lr = [(e.step, e.payload.values["lr"]) for e in events if e.kind is EventKind.METRICS]
        applied = set_lr["applied_step"]
        assert {v for s, v in lr if s < applied} == {0.05} and {v for s, v in lr if s >= applied} == {0.01}
        series = httpx.get(f"{server.url}/runs/{run_id}/series", timeout=10).json()
        assert {"loss", "lr", "val_loss"} <= {row["key"] for row in series}, "one rank: as the loop named them"
        metrics = wait_for(lambda: {"loss", "lr", "val_loss"} <= set(
            m := httpx.get(f"{server.url}/runs/{run_id}", timeout=10).json()["metrics"]) and m, 30, "its summaries")
        assert not any("rank" in k for k in metrics), sorted(metrics)
        val = [e.payload.values["val_loss"] for e in events
               if e.kind is EventKind.METRICS and "val_loss" in e.payload.values]
        assert len(val) >= 2 and all(isinstance(v, float) for v in val)
        layers = [e for e in events if e.kind is EventKind.DEBUG_LAYER_STATS]
        assert layers and {e.payload.model for e in layers} == {"mlp"}
        assert {lay.name for lay in layers[0].payload.layers} == {"0.weight", "0.bias", "2.weight", "2.bias"}
        assert all(debug["applied_step"] <= e.step for e in layers)  # the gradients of the step it applied at, on
        profiles = [e.payload for e in events if e.kind is EventKind.PROFILE_COMPLETED]
        assert len(profiles) == 2 and all(p.artifact for p in profiles)
    finally:
        if loop.proc.poll() is None:
            loop.proc.kill()
        server.stop()


@pytest.mark.parametrize("args, expected", [
    (["--server", "localhost:8765"], "nissa.init: server: expected http://host:port, got 'localhost:8765'"),
    (["--lr", "-1"], "--lr must be > 0, got -1.0"),
])
def test_a_wrong_flag_is_one_line_naming_it(tmp_path, args, expected):
    done = subprocess.run([sys.executable, str(EXAMPLE), "--log-dir", str(tmp_path), *args], capture_output=True,
                          text=True, env=_env(), timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == f"plain_loop.py: error: {expected}"
