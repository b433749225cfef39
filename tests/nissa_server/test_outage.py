"""A database restart heals: PostgreSQL stopped and started again under a live run, a queued command and an
alert whose notice is pending. Meanwhile reads answer 503 with a reason and the server says it is degraded;
afterwards every background task works again, and nothing stored is lost."""

from __future__ import annotations

import asyncio
import logging
import time

import httpx
import pytest

from leyline import AnomalyDetected, Severity, make_event
from nissa_server.alerts.rules import parse_rules
from tests.support import IngestClient, async_wait_for, events_for, wait_status
from tests.support.databases import start_postgres, stop_postgres
from tests.support.server import running_server
from tests.support.webhook import webhook_receiver

pytestmark = pytest.mark.postgresql_only
RUN, STEADY = "silent", "steady"


def _rules(url: str):
    return parse_rules({"destinations": {"hook": {"urls": [url]}}, "rules": [
        {"name": "bad", "when": "anomaly", "min_severity": "error"},
        {"name": "gone", "when": "status", "status": ["lost"], "runs": RUN}]}, "alerts.toml")


def _spike(seq: int):
    return make_event(AnomalyDetected(anomaly="kl_spike", detail="approx KL 0.09 > 0.0225"), run_id=RUN, seq=seq,
                      ts=1.7e9 + seq, step=seq, epoch=0, severity=Severity.ERROR)


def _degraded_lines(caplog, part: str) -> int:
    return sum(1 for r in caplog.records if r.getMessage().startswith(f"{part} degraded:"))


async def _seqs(http: httpx.AsyncClient, run_id: str) -> list[int]:
    events = (await http.get(f"/runs/{run_id}/events", params={"limit": 1000})).json()
    return [e["seq"] for e in events if e["rank"] == 0]


async def test_a_database_restart_under_a_live_run_and_a_pending_alert_heals(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    with webhook_receiver(fail_first=1000) as hook, running_server(
            tmp_path, alert_rules=_rules(hook.url), maintenance_interval_s=0.2, retry_max_s=1.0) as url:
        nissa = url.app.state.nissa
        ahead = 0.0
        nissa.clock = lambda: time.time() + ahead  # maintenance's now: moved on after the restart, not waited for
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            trainer = await IngestClient(url, RUN).__aenter__()
            await trainer.send([*events_for(RUN, 5, started=True), _spike(6)])
            await trainer.wait_ack(6)
            steady = await IngestClient(url, STEADY).__aenter__()
            steady_events = events_for(STEADY, 8, started=True)
            await steady.send(steady_events[:5])
            await steady.wait_ack(5)
            queued = await http.post("/escalate", json={"run_id": RUN, "action": "debug", "epochs": 2})
            command_id = queued.json()["command_id"]
            await async_wait_for(lambda: hook.refused >= 1, timeout=60, message="a first delivery that failed")

            await asyncio.to_thread(stop_postgres)
            try:
                run = await http.get(f"/runs/{RUN}")
                assert run.status_code == 503, run.text
                assert "the database is unavailable" in run.json()["detail"] and run.headers["retry-after"]

                async def degraded() -> bool:
                    body = (await http.get("/healthz")).json()
                    return body["status"] == "degraded" and {"database", "maintenance"} <= set(body["degraded"])

                await async_wait_for(degraded, timeout=60, message="/healthz says degraded")
                metrics = (await http.get("/metrics")).text
                assert 'nissa_degraded{part="maintenance"} 1.0' in metrics
                assert 'nissa_degraded{part="database"} 1.0' in metrics
                await steady.send(steady_events[5:])  # not stored, not acked: sent again after
                await trainer.__aexit__(None, None, None)  # the run's trainer dies while the database is away
                await asyncio.sleep(1.5)  # several tries of every background task, each failing
            finally:
                await asyncio.to_thread(start_postgres)
            hook.fail_first = 0  # the destination is back too

            ahead = 10_000.0  # past the run's lost_after_s and the command's time to live
            await wait_status(url, RUN, "lost", timeout=60)
            await async_wait_for(lambda: _command_status(http, command_id), timeout=60, message="command expired")
            posts = await asyncio.to_thread(hook.wait, lambda bodies: len(bodies) >= 2, 60)
            assert sorted(b["title"] for _, b in posts) == ["[nissa] bad: demo: kl_spike", "[nissa] gone: demo: lost"]

            async with IngestClient(url, STEADY) as again:  # its trainer reconnects and sends what was not acked
                await again.send(steady_events)
                await again.wait_ack(8)
            assert await _seqs(http, RUN) == [1, 2, 3, 4, 5, 6]
            assert await _seqs(http, STEADY) == list(range(1, 9))

            async def healed() -> bool:
                return (await http.get("/healthz")).json()["status"] == "ok"

            await async_wait_for(healed, timeout=60, message="/healthz ok again")
            assert 'nissa_degraded{part="maintenance"} 0.0' in (await http.get("/metrics")).text
            await steady.__aexit__(None, None, None)
    # Said once per outage, not per try (a task whose read began before the outage was seen may have waited
    # for a connection through it instead, and not failed at all).
    said = {part: _degraded_lines(caplog, part) for part in ("database", "maintenance", "alert-sweep",
                                                              "alert-delivery", "series-pass", "notifications")}
    assert said["database"] == said["maintenance"] == 1 and max(said.values()) == 1, said


async def _command_status(http: httpx.AsyncClient, command_id: str) -> bool:
    reply = await http.get(f"/commands/{command_id}")
    return reply.status_code == 200 and reply.json()["status"] == "expired"
