"""A run's status follows how its run_finished says it ended, live and after a restart."""

from __future__ import annotations

import typing

import httpx
import pytest

from leyline import RunFinished, RunResumed, RunStatus, make_event
from tests.support import events_for, ingest_events, running_server

ENDINGS = typing.get_args(typing.get_type_hints(RunFinished)["status"])


def test_every_ending_has_its_own_status():
    statuses = {ending: RunStatus.after_finish(ending) for ending in ENDINGS}
    assert statuses == {"completed": RunStatus.FINISHED, "interrupted": RunStatus.INTERRUPTED,
                        "failed": RunStatus.FAILED, "stopped": RunStatus.STOPPED}
    assert all(s.ended for s in statuses.values())
    assert not RunStatus.LIVE.ended and not RunStatus.LOST.ended


@pytest.mark.parametrize(("ending", "status"), [("completed", "finished"), ("interrupted", "interrupted"),
                                                ("failed", "failed"), ("stopped", "stopped")])
async def test_run_status_says_how_the_run_ended(tmp_path, ending, status):
    run_id = f"run-{ending}"
    events = events_for(run_id, 3, started=True)
    events.append(make_event(RunFinished(status=ending, duration_s=1.0), run_id=run_id, seq=4, ts=1.7e9 + 4))
    with running_server(tmp_path) as url:
        await ingest_events(url, events)
        assert httpx.get(f"{url}/runs/{run_id}", timeout=10).json()["status"] == status
    with running_server(tmp_path) as url:  # the same database, read back at start-up
        listed = httpx.get(f"{url}/runs", timeout=10).json()
        assert [(r["run_id"], r["status"]) for r in listed] == [(run_id, status)]
        refused = httpx.post(f"{url}/escalate", json={"run_id": run_id, "action": "debug", "epochs": 1}, timeout=10)
        assert refused.status_code == 409 and status in refused.json()["detail"]


async def test_a_resumed_run_is_live_again_and_ends_once_more(tmp_path):
    """stopped, then ``run_resumed`` on the same stream: live (its old ending forgotten), then finished."""
    run_id = "run-resumed"
    events = events_for(run_id, 3, started=True)
    events.append(make_event(RunFinished(status="stopped", duration_s=1.0), run_id=run_id, seq=4,
                             ts=1.7e9 + 4))
    resumed = RunResumed(checkpoint="round-000002", path="runs/x/checkpoints/round-000002", round=2,
                         checkpoint_step=40, checkpoint_epoch=8, checkpoint_seq=3)
    with running_server(tmp_path) as url:
        await ingest_events(url, events)
        assert httpx.get(f"{url}/runs/{run_id}", timeout=10).json()["status"] == "stopped"
        await ingest_events(url, [make_event(resumed, run_id=run_id, seq=5, ts=1.7e9 + 5, step=40, epoch=8)])
        run = httpx.get(f"{url}/runs/{run_id}", timeout=10).json()
        assert run["status"] == "live" and run["finish"] is None and run["ended_at"] is None
        accepted = httpx.post(f"{url}/escalate", json={"run_id": run_id, "action": "checkpoint"}, timeout=10)
        assert accepted.status_code == 202
        await ingest_events(url, [make_event(RunFinished(status="completed", duration_s=2.0), run_id=run_id,
                                             seq=6, ts=1.7e9 + 6)])
        run = httpx.get(f"{url}/runs/{run_id}", timeout=10).json()
        assert run["status"] == "finished" and run["finish"]["duration_s"] == 2.0
