"""One run on two ranks under torchrun (gloo, CPU) through a real nissa-server, and one rank killed.

One run serves every test here (two ranks on two shared cores are slow to start; about 25 s in all):
``--profile 2`` opens a window on both ranks; once both ranks have updated the policy twice, a debug
window is asked for; once it completed on both, rank 1 is killed with SIGKILL. torchrun then tears the
job down (SIGTERM to rank 0, which flushes its log), the server marks the run failed naming rank 1, and
``esper-train upload`` of the run directory brings the server every event both ranks logged.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
from dataclasses import dataclass

import httpx
import pytest

from .api import command, escalate, run_known, server_events, wait_for
from .procs import ServerProcess, _env, script

pytestmark = pytest.mark.e2e

TINY = ["--device", "cpu", "--n-envs", "1", "--train-size", "128", "--val-size", "64", "--batch-size", "32",
        "--episode-length", "3", "--lstm-hidden", "8", "--rounds", "400", "--log-every", "0",
        "--gradient-telemetry-stride", "2", "--close-timeout", "10"]


@dataclass
class KilledRun:
    url: str
    run_id: str
    run_dir: pathlib.Path
    command: dict
    """The debug window's record, as GET /commands/{id} showed it once complete."""
    exit_code: int
    output: str
    run_after_kill: dict
    """GET /runs/{id} once the run had ended."""
    rank0_before_upload: list[dict]
    uploaded: subprocess.CompletedProcess


def _log(run_dir: pathlib.Path, rank: int) -> list[dict]:
    name = "events.jsonl" if rank == 0 else f"events.rank{rank}.jsonl"
    lines = (run_dir / name).read_bytes().splitlines()
    return [json.loads(line) for line in lines]


def _stored(url: str, run_id: str, rank: int) -> list[dict]:
    return [json.loads(json.dumps(_builtins(e))) for e in server_events(url, run_id, rank=rank)]


def _builtins(event) -> dict:
    import msgspec

    return msgspec.to_builtins(event)


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory) -> KilledRun:
    root = tmp_path_factory.mktemp("multirank")
    # A rank is silent past one heartbeat interval (5 s) and a little: the killed rank is named soon.
    server = ServerProcess(root / "nissa.db", extra_args=("--rank-silent-after", "6")).start()
    log_dir = root / "runs"
    out = open(root / "torchrun.out", "w+")
    proc = subprocess.Popen([script("torchrun"), "--standalone", "--nproc-per-node", "2", "-m", "trainer",
                             "--server", server.url, "--log-dir", str(log_dir), "--run-name", "two", "--profile", "2",
                             *TINY], stdout=out, stderr=subprocess.STDOUT, env=_env())
    try:
        run_dir = wait_for(lambda: next(log_dir.glob("two-*/events.rank1.jsonl"), None), 120, "both ranks' logs").parent
        run_id = run_dir.name
        wait_for(lambda: run_known(server.url, run_id), 60, "the run to reach the server")  # its log comes first
        updates = lambda rank: server_events(server.url, run_id, rank=rank, kind="ppo_update")  # noqa: E731
        wait_for(lambda: len(updates(0)) >= 2 and len(updates(1)) >= 2, 120, "two policy updates on each rank")
        queued = escalate(server.url, {"run_id": run_id, "action": "debug", "epochs": 1, "reason": "two ranks"})
        record = wait_for(lambda: (c := command(server.url, queued["command_id"]))["status"] == "completed" and c,
                          60, "the debug window completed on both ranks")
        pid = httpx.get(f"{server.url}/runs/{run_id}", timeout=10).json()["ranks"][1]["pid"]
        os.kill(pid, signal.SIGKILL)
        code = proc.wait(timeout=90)
        run = wait_for(lambda: (r := httpx.get(f"{server.url}/runs/{run_id}", timeout=10).json())["status"]
                       not in ("live", "degraded") and r, 60, "the run ended")
        before = _stored(server.url, run_id, 0)
        uploaded = subprocess.run([script("esper-train"), "upload", str(run_dir), "--server", server.url],
                                  capture_output=True, text=True, timeout=120)
        out.seek(0)
        yield KilledRun(server.url, run_id, run_dir, record, code, out.read(), run, before, uploaded)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        out.close()
        server.stop()


def test_two_ranks_are_one_run_and_the_kill_fails_it_naming_the_rank(killed_run):
    run = killed_run.run_after_kill
    assert killed_run.exit_code != 0, killed_run.output[-3000:]
    assert run["world_size"] == 2 and run["status"] == "failed", run
    # Rank 0 may fail at its next exchange with the dead rank before torchrun's SIGTERM interrupts it.
    assert run["status_detail"] in ("rank 1 stopped without finishing",
                                    "rank 1 stopped without finishing; rank 0 failed"), run
    assert [r["rank"] for r in run["ranks"]] == [0, 1]
    assert run["ranks"][0]["status"] in ("interrupted", "failed") and run["ranks"][1]["status"] == "lost"


def test_the_surviving_rank_flushed_its_log_to_the_server(killed_run):
    local = _log(killed_run.run_dir, 0)
    assert local[-1]["kind"] == "run_finished" and local[-1]["payload"]["status"] in ("interrupted", "failed")
    assert killed_run.rank0_before_upload == local


def test_after_upload_every_rank_stream_is_gap_free_and_equal_to_its_log(killed_run):
    assert killed_run.uploaded.returncode == 0, killed_run.uploaded.stdout + killed_run.uploaded.stderr
    for rank in (0, 1):
        local = _log(killed_run.run_dir, rank)
        assert [e["seq"] for e in local] == list(range(1, len(local) + 1))
        assert _stored(killed_run.url, killed_run.run_id, rank) == local, f"rank {rank}"
        assert {e["rank"] for e in local} == {rank}


def test_an_escalation_applies_at_the_same_step_on_both_ranks(killed_run):
    record = killed_run.command
    steps = [r["applied_step"] for r in record["ranks"]]
    assert [r["rank"] for r in record["ranks"]] == [0, 1] and len(set(steps)) == 1, record
    assert record["applied_step"] == steps[0] and all(r["status"] == "completed" for r in record["ranks"])
    for rank in (0, 1):
        levels = [e for e in _log(killed_run.run_dir, rank) if e["kind"] == "telemetry_level_changed"
                  and e["payload"].get("command_id") == record["command_id"]]
        assert [(e["payload"]["level"], e["step"]) for e in levels][:1] == [("DEBUG", steps[0])], rank


def test_the_policy_weights_are_identical_on_both_ranks_after_each_update(killed_run):
    digests = {}
    for rank in (0, 1):
        for e in _log(killed_run.run_dir, rank):
            if e["kind"] == "ppo_update":
                digests.setdefault(e["payload"]["round"], {})[rank] = e["payload"]["policy_digest"]
    both = {r: d for r, d in digests.items() if len(d) == 2}
    assert len(both) >= 2 and all(d[0] == d[1] and d[0] for d in both.values()), digests
    assert len({d[0] for d in both.values()}) == len(both)  # the weights moved between updates


def test_one_profile_window_gives_one_trace_per_rank_that_hta_loads_as_one_job(killed_run):
    from hta.trace_analysis import TraceAnalysis

    windows = sorted((killed_run.run_dir / "profiles").iterdir())
    assert [w.name for w in windows] == ["w1-step1"]
    traces = sorted(p.name for p in windows[0].glob("*.pt.trace.json"))
    assert [t.split(".")[0] for t in traces] == ["rank0", "rank1"]
    analysis = TraceAnalysis(trace_dir=str(windows[0]))
    assert sorted(analysis.t.get_ranks()) == [0, 1]
    artifacts = httpx.get(f"{killed_run.url}/runs/{killed_run.run_id}/artifacts", timeout=10).json()
    assert sorted(a["name"].split("-")[3] for a in artifacts if a["name"].startswith("profile-w1-step1-")) == [
        "rank0", "rank1"]


def test_a_healthy_run_of_two_ranks_reports_no_straggler(killed_run):
    """Two equal ranks on shared cores jitter epoch by epoch, now one ahead, now the other: that is no
    straggler (before the minimum duration and the hysteresis, such runs raised one every few epochs,
    flipping between the ranks). A machine loaded by other work can slow one rank for epochs on end: that
    one is reported, once, if its steps are slower by more than the floor (25 ms: this run's steps take a
    few milliseconds, and a load of 12 made one rank twice as slow as the other, by 6 ms, for 3 epochs)."""
    events = _log(killed_run.run_dir, 0)
    epochs = {e["epoch"] for e in events if e["kind"] == "epoch_completed"}
    stragglers = [e["payload"]["detail"] for e in events
                  if e["kind"] == "anomaly_detected" and e["payload"]["anomaly"] == "straggler"]
    assert len(epochs) >= 6 and len(stragglers) <= 1, (len(epochs), stragglers)


def test_each_ranks_envs_are_numbered_from_its_base(killed_run):
    # --n-envs 1 per rank: rank r's env is reported as r (nissa.init's envs_per_rank), unique across the run.
    for rank in (0, 1):
        envs = {e["env"] for e in _log(killed_run.run_dir, rank) if e.get("env") is not None}
        assert envs == {rank}, (rank, envs)
