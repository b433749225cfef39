"""Sweeps with real processes: a server, ``nissa sweep create``, agents, and trials that are plain loops
(``examples/sweep_loop.py``). PBT copies weights in the live process; grid runs each point once; two agents
share a sweep; a killed agent's trial is lost and queued again; a restarted server carries on."""

from __future__ import annotations

import itertools
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from tests.e2e.procs import ServerProcess, _env, script
from tests.support.server import stop_process

pytestmark = pytest.mark.timeout(600)  # trials are processes that import torch: slow on a busy machine
ROOT = pathlib.Path(__file__).resolve().parents[2]
LOOP = str(ROOT / "examples" / "sweep_loop.py")


def _write_spec(tmp_path: pathlib.Path, text: str, name: str = "spec.toml") -> pathlib.Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _spec(method: str, steps: int, step_s: float, trials: int, parallel: int, params: str, log_dir: pathlib.Path,
          extra: str = "") -> str:
    command = json.dumps([sys.executable, LOOP, "--steps", str(steps), "--step-s", str(step_s),
                          "--log-dir", str(log_dir)])
    return (f'name = "{method}-e2e"\nproject = "e2e"\nmethod = "{method}"\ncommand = {command}\n'
            f"trials = {trials}\nparallel = {parallel}\n[metric]\nname = \"val_loss\"\n{params}\n{extra}")


def _create(server: ServerProcess, spec: pathlib.Path, *flags: str) -> str:
    done = subprocess.run([script("nissa"), "sweep", "create", str(spec), "--server", server.url, *flags],
                          capture_output=True, text=True, timeout=240, env=_env())  # a pbt spec's probe imports torch
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def _agent(server: ServerProcess, sweep_id: str, tmp_path: pathlib.Path, slots: int, name: str) -> subprocess.Popen:
    log = open(tmp_path / f"{name}.log", "w")  # noqa: SIM115 - the process writes it until it ends
    return subprocess.Popen([script("nissa"), "sweep", "agent", sweep_id, "--server", server.url, "--slots",
                             str(slots), "--log-dir", str(tmp_path / "sweep-logs")],
                            stdout=log, stderr=subprocess.STDOUT, env=_env(), cwd=tmp_path)


def _sweep(server: ServerProcess, sweep_id: str) -> dict:
    reply = httpx.get(f"{server.url}/sweeps/{sweep_id}", timeout=30)
    reply.raise_for_status()
    return reply.json()


def _wait(what: str, check: Callable[[], object], timeout: float = 240.0) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def server(tmp_path: pathlib.Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path / "db" / "nissa.db", extra_args=("--sweep-lease", "4", "--lost-after", "6")).start()
    try:
        yield proc
    finally:
        proc.stop()


def _finish(agent: subprocess.Popen, timeout: float = 420.0) -> int:
    try:
        return agent.wait(timeout)
    finally:
        if agent.poll() is None:
            stop_process(agent)


PBT = """[parameters.lr]\nmin = 0.002\nmax = 0.3\nlog = true\n[parameters.momentum]\nvalues = [0.0, 0.9]"""


def test_pbt_copies_the_top_trials_weights_into_the_bottom_trial_without_a_restart(server, tmp_path):
    spec = _spec("pbt", 240, 0.02, 4, 4, PBT, tmp_path / "runs", "[pbt]\ninterval = 10\nquantile = 0.25\n")
    sweep_id = _create(server, _write_spec(tmp_path, spec))
    agent = _agent(server, sweep_id, tmp_path, 4, "agent")
    assert _finish(agent) == 0, (tmp_path / "agent.log").read_text()
    sweep = _sweep(server, sweep_id)
    assert sweep["status"] == "finished" and len(sweep["trials"]) == 4
    assert all(t["status"] == "finished" for t in sweep["trials"])
    applied = [(t, e) for t in sweep["trials"] for e in t.get("lineage", []) if e["status"] == "applied"]
    assert applied, sweep
    log = (tmp_path / "agent.log").read_text()
    assert log.count("started as run") == 4, log  # four processes in all: none restarted
    shared = {c["result"]["artifact"]: c["result"]["fingerprint"] for t in sweep["trials"]
              for c in _commands(server, t["run_id"]) if c["action"] == "checkpoint" and c["status"] == "completed"}
    for trial, exploit in applied:
        restores = [c for c in _commands(server, trial["run_id"]) if c["action"] == "restore"
                    and c["status"] == "completed" and c["result"]["source_run_id"] == exploit["source_run_id"]]
        loaded = _metric(server, trial["run_id"], "restored_fingerprint")
        assert restores and all(r["result"]["artifact"] in shared for r in restores), (restores, shared)
        assert any(abs(v - shared[r["result"]["artifact"]]) < 1e-6 * max(1.0, abs(v)) for r in restores
                   for v in loaded), (restores, shared, loaded)


def _commands(server: ServerProcess, run_id: str) -> list[dict]:
    return httpx.get(f"{server.url}/runs/{run_id}/commands", timeout=30).json()


def _metric(server: ServerProcess, run_id: str, name: str) -> list[float]:
    events = httpx.get(f"{server.url}/runs/{run_id}/events", params={"kind": "metrics", "limit": 10000},
                       timeout=30).json()
    return [e["payload"]["values"][name] for e in events if name in e["payload"]["values"]]


def test_a_pbt_sweep_over_a_loop_that_cannot_restore_stops_with_the_reason(server, tmp_path):
    spec = _spec("pbt", 50, 0.0, 2, 2, PBT, tmp_path / "runs").replace('"--log-dir"', '"--no-restore", "--log-dir"')
    sweep_id = _create(server, _write_spec(tmp_path, spec), "--no-probe")  # the probe would refuse it at create
    agent = _agent(server, sweep_id, tmp_path, 2, "agent")
    assert _finish(agent) == 0, (tmp_path / "agent.log").read_text()
    sweep = _sweep(server, sweep_id)
    assert sweep["status"] == "stopped" and "sets no run.on_restore" in sweep["message"], sweep
    # A trial still running when the sweep stopped is followed to its end (its run fails as the other's did).
    ended = _wait("the stopped sweep's trials to end", lambda: (s := _sweep(server, sweep_id)) and not [
        t for t in s["trials"] if t["status"] in ("running", "queued")] and s, timeout=60)
    assert [t["status"] for t in ended["trials"]] == ["failed", "failed"], ended


def test_grid_runs_each_point_once_over_two_agents(server, tmp_path):
    params = "[parameters.lr]\nvalues = [0.01, 0.1]\n[parameters.hidden]\nvalues = [8, 16]"
    sweep_id = _create(server, _write_spec(tmp_path, _spec("grid", 20, 0.02, 50, 2, params, tmp_path / "runs")))
    agents = [_agent(server, sweep_id, tmp_path, 1, f"agent{i}") for i in range(2)]
    assert [_finish(a) for a in agents] == [0, 0], (tmp_path / "agent0.log").read_text()
    sweep = _sweep(server, sweep_id)
    assert sweep["status"] == "finished" and [t["status"] for t in sweep["trials"]] == ["finished"] * 4
    points = sorted((t["params"]["lr"], t["params"]["hidden"]) for t in sweep["trials"])
    assert points == sorted(itertools.product([0.01, 0.1], [8, 16]))
    assert len({t["agent"] for t in sweep["trials"]}) == 2  # both agents took trials of the one sweep
    runs = httpx.get(f"{server.url}/runs", params={"q": f"tag:{sweep_id}"}, timeout=30).json()
    rows = runs["runs"] if isinstance(runs, dict) else runs
    assert len(rows) == 4 and {r["group"] for r in rows} == {"grid-e2e"} and {r["project"] for r in rows} == {"e2e"}


def test_a_killed_agent_leaves_no_trial_running_and_the_sweep_finishes(server, tmp_path):
    params = "[parameters.lr]\nmin = 0.001\nmax = 0.1"
    sweep_id = _create(server, _write_spec(tmp_path, _spec("random", 60, 0.1, 2, 1, params, tmp_path / "runs")))
    first = _agent(server, sweep_id, tmp_path, 1, "first")
    _wait("a trial's run to stream", lambda: any(t.get("step") for t in _sweep(server, sweep_id)["trials"]))
    os.kill(first.pid, signal.SIGKILL)
    first.wait(30)
    lost = _wait("the trial lost", lambda: [t for t in _sweep(server, sweep_id)["trials"] if t["status"] == "lost"])
    run_id = lost[0]["run_id"]  # type: ignore[index]
    before = httpx.get(f"{server.url}/runs/{run_id}", timeout=30).json()["last_step"]
    time.sleep(2.0)  # its process died with its agent: the run does not go on
    assert httpx.get(f"{server.url}/runs/{run_id}", timeout=30).json()["last_step"] == before
    second = _agent(server, sweep_id, tmp_path, 1, "second")
    assert _finish(second) == 0, (tmp_path / "second.log").read_text()
    sweep = _sweep(server, sweep_id)
    assert sweep["status"] == "finished"
    statuses = sorted(t["status"] for t in sweep["trials"])
    assert statuses == ["finished", "finished", "lost"], sweep
    assert not [t for t in sweep["trials"] if t["status"] == "running"]


def test_a_restarted_server_carries_the_sweep_on(server, tmp_path):
    params = "[parameters.lr]\nmin = 0.001\nmax = 0.1"
    sweep_id = _create(server, _write_spec(tmp_path, _spec("random", 40, 0.05, 2, 1, params, tmp_path / "runs")))
    agent = _agent(server, sweep_id, tmp_path, 1, "agent")
    _wait("the first trial's run to stream", lambda: any(t.get("step") for t in _sweep(server, sweep_id)["trials"]))
    server.kill()
    time.sleep(1.0)
    server.start()
    assert _finish(agent) == 0, (tmp_path / "agent.log").read_text()
    sweep = _sweep(server, sweep_id)
    assert sweep["status"] == "finished"
    assert [t["status"] for t in sweep["trials"]] == ["finished", "finished"], sweep


def test_a_hostile_spec_is_refused_by_the_server_and_the_command(server, tmp_path):
    for body, words in (({"name": "x", "method": "random", "metric": {"name": "m"}, "command": "rm -rf /",
                          "parameters": {"a": {"values": [1]}}}, "$.command"),
                        ({"name": "x", "method": "random", "metric": {"name": "m"}, "command": ["x"], "trials": 10**7,
                          "parameters": {"a": {"values": [1]}}}, "$.trials"),
                        ({"name": "x", "method": "random", "metric": {"name": "m"}, "command": ["x"], "rogue": 1,
                          "parameters": {"a": {"values": [1]}}}, "rogue")):
        reply = httpx.post(f"{server.url}/sweeps", json=body, timeout=30)
        assert reply.status_code == 422 and words in reply.json()["detail"], reply.text
    reply = httpx.post(f"{server.url}/sweeps", content=b'{"name": "x", "parameters": {"a": {"min": NaN}}}',
                       timeout=30)
    assert reply.status_code == 422
    bad = _write_spec(tmp_path, 'name = "x"\nmethod = "random"\ncommand = ["x"]\n[metric]\nname = "m"\n'
                      "[parameters.lr]\nmin = nan\nmax = 1.0\n")
    done = subprocess.run([script("nissa"), "sweep", "create", str(bad), "--server", server.url],
                          capture_output=True, text=True, timeout=60, env=_env())
    assert done.returncode != 0 and "finite" in done.stderr and "Traceback" not in done.stderr
    assert httpx.get(f"{server.url}/sweeps", timeout=30).json() == []


def test_two_servers_on_one_postgresql_serve_one_sweep(tmp_path):
    """Agents on two servers sharing a PostgreSQL database take the trials of one sweep, each once, and both
    servers take its decisions (in the database's transactions) without taking one twice."""
    from tests.support.databases import new_database, postgres_unavailable

    why = postgres_unavailable()
    if why is not None:
        pytest.skip(why)
    url = new_database()
    shared = ("--artifact-dir", str(tmp_path / "artifacts"), "--sweep-lease", "4")
    a, b = (ServerProcess(tmp_path / f"{name}.db", db_url=url, extra_args=shared).start() for name in "ab")
    try:
        params = "[parameters.lr]\nvalues = [0.01, 0.1]\n[parameters.hidden]\nvalues = [8, 16]"
        sweep_id = _create(a, _write_spec(tmp_path, _spec("grid", 20, 0.02, 4, 2, params, tmp_path / "runs")))
        agents = [_agent(server, sweep_id, tmp_path, 1, f"agent-{i}") for i, server in enumerate((a, b))]
        assert [_finish(agent) for agent in agents] == [0, 0], (tmp_path / "agent-1.log").read_text()
        seen = [_sweep(server, sweep_id) for server in (a, b)]
        assert seen[0] == seen[1] and seen[0]["status"] == "finished"
        trials = seen[0]["trials"]
        assert [t["status"] for t in trials] == ["finished"] * 4 and len({t["agent"] for t in trials}) == 2
        assert sorted((t["params"]["lr"], t["params"]["hidden"]) for t in trials) == sorted(
            itertools.product([0.01, 0.1], [8, 16]))
    finally:
        for server in (a, b):
            server.stop()


def test_status_and_stop_from_the_shell(server, tmp_path):
    params = "[parameters.lr]\nmin = 0.001\nmax = 0.1"
    sweep_id = _create(server, _write_spec(tmp_path, _spec("random", 5, 0.0, 3, 1, params, tmp_path / "runs")))

    def nissa(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([script("nissa"), "sweep", *args, "--server", server.url], capture_output=True,
                              text=True, timeout=60, env=_env())

    shown = nissa("status", sweep_id)
    assert shown.returncode == 0 and f"sweep {sweep_id} (random-e2e): running, random" in shown.stdout, shown
    stopped = nissa("stop", sweep_id)
    assert stopped.returncode == 0 and stopped.stdout.strip() == f"sweep {sweep_id}: stopped", stopped
    as_json = json.loads(nissa("status", sweep_id, "--format", "json").stdout)
    assert as_json["status"] == "stopped" and as_json["message"] == "the sweep was stopped"
    unknown = nissa("status", "no-such-sweep")
    assert unknown.returncode == 1 and "404 unknown sweep 'no-such-sweep'" in unknown.stderr, unknown
