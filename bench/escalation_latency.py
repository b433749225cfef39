"""Escalation latency on a live run: ``POST /escalate`` → the command ``applied`` in the trainer, p50/p99 ms.

Starts ``nissa-server`` and a long ``esper-train`` run as subprocesses on loopback, then sends
``--samples`` debug escalations one after another. Each latency is the ``ts`` of the trainer's
``command_status: applied`` event (stamped by the trainer when it applied the command at a step
boundary) minus the wall time just before the POST: the same machine's clock on both sides.
Commands apply only between training batches, so the baseline is the run's batch interval
(measured from the same events): ``ratio`` = p50 latency / batch interval says how many
batches an escalation waits, of which about half a batch is inherent.

    python bench/escalation_latency.py [--samples 40]

Last line: key=value pairs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from leyline import CommandStatus, CommandStatusChanged, decode_events

TRAIN_ARGS = ["--rounds", "500", "--episode-length", "4", "--n-envs", "1", "--train-size", "1024",
              "--val-size", "128", "--batch-size", "64", "--policy", "heuristic"]


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _script(name: str) -> str:
    found = shutil.which(name, path=os.path.dirname(sys.executable)) or shutil.which(name)
    if not found:
        raise SystemExit(f"{name} is not installed in this environment")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise SystemExit(f"timed out waiting for {what}")


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def _run_id(trainer: subprocess.Popen) -> str:
    assert trainer.stdout is not None
    for line in trainer.stdout:
        if line.startswith("run id: "):
            # Keep draining its output so that a full pipe never blocks the trainer.
            threading.Thread(target=lambda: [None for _ in trainer.stdout], daemon=True).start()
            return line.split(": ", 1)[1].strip()
    raise SystemExit("esper-train printed no run id")


def _applied(url: str, run_id: str) -> dict[str, tuple[float, int]]:
    resp = httpx.get(f"{url}/runs/{run_id}/events", params={"kind": "command_status", "limit": 10000}, timeout=30)
    resp.raise_for_status()
    out: dict[str, tuple[float, int]] = {}
    for e in decode_events(resp.content):
        p = e.payload
        if isinstance(p, CommandStatusChanged) and p.status is CommandStatus.APPLIED:
            out[p.command_id] = (e.ts, p.applied_step or e.step)
    return out


def _escalate(url: str, client: httpx.Client, run_id: str) -> tuple[str, float]:
    while True:
        t0 = time.time()
        resp = client.post(f"{url}/escalate", json={"run_id": run_id, "action": "debug", "epochs": 1,
                                                    "reason": "latency bench"})
        if resp.status_code == 202:
            return resp.json()["command_id"], t0
        if resp.status_code not in (409, 429):  # too many open commands: wait for some to finish
            raise SystemExit(f"POST /escalate: {resp.status_code} {resp.text}")
        time.sleep(0.2)


def measure(url: str, run_id: str, samples: int) -> tuple[list[float], float]:
    sent: dict[str, float] = {}
    with httpx.Client(timeout=10) as client:
        for _ in range(samples):
            cid, t0 = _escalate(url, client, run_id)
            sent[cid] = t0
            _wait(lambda cid=cid: client.get(f"{url}/commands/{cid}").json().get("status")
                  not in ("queued", "delivered"),
                  60, f"command {cid} to apply")
    def all_applied() -> dict[str, tuple[float, int]] | None:
        found = _applied(url, run_id)
        return found if all(c in found for c in sent) else None

    applied = _wait(all_applied, 60, "every applied event to reach the server")
    latencies = [(applied[c][0] - t0) * 1e3 for c, t0 in sent.items()]
    points = sorted(applied[c] for c in sent)
    (ts0, step0), (ts1, step1) = points[0], points[-1]
    batch_ms = (ts1 - ts0) * 1e3 / max(1, step1 - step0)
    return latencies, batch_ms


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's settings from ``argv``: its own defaults, checked."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--samples", type=int, default=40)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    env = {k: v for k, v in os.environ.items() if k not in ("NISSA_TOKEN", "NISSA_SERVER")}
    with tempfile.TemporaryDirectory(prefix="escalation-bench-") as tmp:
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        server = subprocess.Popen([_script("nissa-server"), "--host", "127.0.0.1", "--port", str(port),
                                   "--db", str(Path(tmp) / "nissa.db")], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, env=env)
        trainer = None
        try:
            _wait(lambda: _healthy(url), 60, "nissa-server")
            trainer = subprocess.Popen([_script("esper-train"), "--server", url, "--log-dir", str(Path(tmp) / "runs"),
                                        "--run-name", "latency", *TRAIN_ARGS], stdout=subprocess.PIPE,
                                       stderr=subprocess.DEVNULL, text=True, env=env)
            run_id = _run_id(trainer)
            _wait(lambda: httpx.get(f"{url}/runs/{run_id}", timeout=5).status_code == 200, 60, "the run")
            latencies, batch_ms = measure(url, run_id, args.samples)
        finally:
            for proc in (trainer, server):
                if proc is not None and proc.poll() is None:
                    proc.terminate()
                    try:
                        proc.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        proc.kill()
    q = statistics.quantiles(latencies, n=100, method="inclusive")
    p50, p99 = statistics.median(latencies), q[98]
    _say(f"{len(latencies)} debug escalations on a live run; batch interval {batch_ms:.1f} ms")
    _say(f"  POST -> applied: p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {max(latencies):.1f} ms")
    _say(f"samples={len(latencies)} p50_ms={p50:.2f} p99_ms={p99:.2f} batch_ms={batch_ms:.2f} "
         f"ratio={p50 / batch_ms:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
