"""A run's status follows how its run_finished says it ended, live and after a restart."""

from __future__ import annotations

import typing

import httpx
import pytest

from leyline import RunFinished, RunStatus, make_event
from tests.support import events_for, ingest_events, running_server

ENDINGS = typing.get_args(typing.get_type_hints(RunFinished)["status"])


def test_every_ending_has_its_own_status():
    statuses = {ending: RunStatus.after_finish(ending) for ending in ENDINGS}
    assert statuses == {"completed": RunStatus.FINISHED, "interrupted": RunStatus.INTERRUPTED,
                        "failed": RunStatus.FAILED}
    assert all(s.ended for s in statuses.values())
    assert not RunStatus.LIVE.ended and not RunStatus.LOST.ended


@pytest.mark.parametrize(("ending", "status"), [("completed", "finished"), ("interrupted", "interrupted"),
                                                ("failed", "failed")])
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
