"""A sweep that ended (stopped by hand, or for a broken command) while trials ran keeps following those trials to
their ends: none stays ``running`` once its process has exited and its lease has run out."""

from __future__ import annotations

import httpx

from tests.support.server import running_server
from tests.support.waiting import wait_for

SPEC = {"name": "stopped", "project": "p", "method": "grid", "trials": 2, "parallel": 2, "command": ["true"],
        "metric": {"name": "val_loss"}, "parameters": {"lr": {"values": [0.1, 0.01]}}}


def test_a_stopped_sweeps_running_trials_end_when_their_processes_have(tmp_path):
    with running_server(tmp_path, sweep_lease_s=6.0, sweep_interval_s=0.2) as url:
        created = httpx.post(f"{url}/sweeps", json=SPEC, timeout=30)
        assert created.status_code == 201, created.text
        sweep_id = created.json()["sweep_id"]
        lease = f"{url}/sweeps/{sweep_id}/lease"
        granted = httpx.post(lease, json={"agent": "host-1", "slots": 2}, timeout=30).json()
        assert sorted(t["trial_id"] for t in granted["trials"]) == [1, 2]
        stopped = httpx.post(f"{url}/sweeps/{sweep_id}/stop", timeout=30)
        assert stopped.status_code == 200 and stopped.json()["status"] == "stopped", stopped.text
        # The agent says both processes ended (neither run ever reached the server): one failed, one exited 0.
        last = httpx.post(lease, json={"agent": "host-1", "exited": {"1": 1, "2": 0}}, timeout=30).json()
        assert last["done"] and last["trials"] == []

        def ended() -> dict[int, dict]:
            trials = {t["trial_id"]: t for t in httpx.get(f"{url}/sweeps/{sweep_id}", timeout=30).json()["trials"]}
            return trials if all(t["status"] != "running" for t in trials.values()) else {}

        trials = wait_for(ended, timeout=30, interval=0.2, message="the stopped sweep's trials to end")
        assert trials[1]["status"] == "failed" and "exited with code 1" in trials[1]["message"], trials
        assert trials[2]["status"] == "lost" and "without ending its run" in trials[2]["message"], trials
        assert len(trials) == 2, "an ended sweep queues no trial again"
        assert httpx.get(f"{url}/sweeps/{sweep_id}", timeout=30).json()["status"] == "stopped"
