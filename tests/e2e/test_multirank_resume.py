"""Two gloo ranks under torchrun checkpoint the same round on ``checkpoint``, both stop on ``stop``, and the
run resumed under torchrun goes on as one run: each rank's stream contiguous and equal to its own log."""

from __future__ import annotations

import json
import pathlib
import subprocess

import httpx
import pytest

from .api import command, escalate, run_known, server_events, summary_of, wait_for
from .procs import ServerProcess, _env, script

pytestmark = pytest.mark.e2e

TINY = ["--device", "cpu", "--n-envs", "1", "--train-size", "64", "--val-size", "32", "--batch-size", "32",
        "--episode-length", "2", "--lstm-hidden", "8", "--log-every", "0", "--close-timeout", "10"]


def torchrun(url: str, log_dir: pathlib.Path, out, *args: str) -> subprocess.Popen:
    return subprocess.Popen([script("torchrun"), "--standalone", "--nproc-per-node", "2", "-m", "trainer",
                             "--server", url, "--log-dir", str(log_dir), *args], stdout=out,
                            stderr=subprocess.STDOUT, env=_env())


def completed(url: str, command_id: str) -> dict:
    return wait_for(lambda: (c := command(url, command_id))["status"] == "completed" and c, 120,
                    f"command {command_id} completed on both ranks")


def test_two_ranks_checkpoint_one_round_stop_together_and_resume(tmp_path):
    server = ServerProcess(tmp_path / "nissa.db").start()
    log_dir = tmp_path / "runs"
    out = open(tmp_path / "torchrun.out", "w+")
    proc = torchrun(server.url, log_dir, out, "--run-name", "two", "--rounds", "400", "--checkpoint-every", "0",
                    *TINY)
    resumed = None
    try:
        run_dir = wait_for(lambda: next(log_dir.glob("two-*/events.rank1.jsonl"), None), 120, "both logs").parent
        run_id = run_dir.name
        wait_for(lambda: run_known(server.url, run_id), 60, "the run to reach the server")  # its log comes first
        wait_for(lambda: server_events(server.url, run_id, rank=1, kind="ppo_update"), 120, "an update on rank 1")
        asked = completed(server.url, escalate(server.url, {"run_id": run_id, "action": "checkpoint"})["command_id"])
        name = asked["result"]["path"].rsplit("/", 1)[1]
        assert [r["result"]["path"].rsplit("/", 1)[1] for r in asked["ranks"]] == [name, name]
        assert len({r["applied_step"] for r in asked["ranks"]}) == 1
        assert sorted(p.name for p in (run_dir / "checkpoints" / name).iterdir()) == \
            ["rank0.json", "rank0.pt", "rank1.json", "rank1.pt"]

        stop = escalate(server.url, {"run_id": run_id, "action": "stop"})
        assert proc.wait(timeout=120) == 0, out.seek(0) or out.read()[-3000:]
        stopped = completed(server.url, stop["command_id"])
        rounds = stopped["result"]["round"]
        run = httpx.get(f"{server.url}/runs/{run_id}", timeout=10).json()
        assert run["status"] == "stopped" and [r["status"] for r in run["ranks"]] == ["stopped", "stopped"]

        resumed = torchrun(server.url, log_dir, out, "--resume", str(run_dir), "--rounds", str(rounds + 1))
        assert resumed.wait(timeout=120) == 0, out.seek(0) or out.read()[-3000:]
        run = wait_for(lambda: (r := httpx.get(f"{server.url}/runs/{run_id}", timeout=10).json())["status"]
                       == "finished" and r, 30, "the resumed run finished")
        assert run["finish"]["status"] == "completed"
        summary_of(server.url, run_id, "rounds{rank=0}", rounds + 1)
        last_digest = {}
        for rank in (0, 1):
            name = "events.jsonl" if rank == 0 else f"events.rank{rank}.jsonl"
            local = [json.loads(line) for line in (run_dir / name).read_bytes().splitlines()]
            assert [e["seq"] for e in local] == list(range(1, len(local) + 1))
            stored = wait_for(lambda rank=rank, local=local: (s := server_events(server.url, run_id, rank=rank))
                              and len(s) == len(local)
                              and s, 30, f"rank {rank}'s whole log on the server")
            assert [e.seq for e in stored] == [e["seq"] for e in local]
            assert sum(e["kind"] == "run_resumed" for e in local) == 1
            last_digest[rank] = [e["payload"]["policy_digest"] for e in local if e["kind"] == "ppo_update"][-1]
        assert last_digest[0] is not None and last_digest[0] == last_digest[1]  # one policy, resumed on both
    finally:
        for p in (proc, resumed):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(timeout=30)
        out.close()
        server.stop()
