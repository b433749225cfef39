"""POST /escalate and the life of a command, against a real server and a real ingest connection."""

import asyncio

import httpx
import pytest

from leyline import CommandStatus, CommandStatusChanged, RunFinished, make_event
from tests.support import IngestClient, async_wait_for, collect_watch, events_for, running_server

DEBUG = {"action": "debug", "epochs": 2}


def _report(run_id, seq, command, status, **extra):
    change = CommandStatusChanged(command_id=command.command_id, action=command.action, status=status, **extra)
    return make_event(change, run_id=run_id, seq=seq, ts=1.7e9 + seq, step=extra.get("applied_step") or 0)


async def test_full_life_of_a_command_is_in_the_stream_and_the_record(server_url):
    async with IngestClient(server_url, "life") as client, httpx.AsyncClient(base_url=server_url, timeout=30) as http:
        await client.send(events_for("life", 3))
        await client.wait_ack(3)
        resp = await http.post("/escalate", json={"run_id": "life", **DEBUG, "reason": "look closer"})
        assert resp.status_code == 202 and resp.json()["status"] == "queued"
        command = await client.wait_command()
        assert command.command_id == resp.json()["command_id"] and command.reason == "look closer"
        await client.send([_report("life", 4, command, CommandStatus.DELIVERED),
                           _report("life", 5, command, CommandStatus.APPLIED, applied_step=40),
                           _report("life", 6, command, CommandStatus.COMPLETED, result={"epochs": 2})])
        await client.wait_ack(6)
        record = (await http.get(f"/commands/{command.command_id}")).json()
        assert record["status"] == "completed" and record["applied_step"] == 40
        assert record["result"] == {"epochs": 2}
        assert [h["status"] for h in record["history"]] == ["queued", "delivered", "applied", "completed"]
        assert (await http.get("/runs/life/commands")).json()[0]["command_id"] == command.command_id
    # The server's own "queued" event sits in the run's stream at rank -1.
    events, _ = await collect_watch(server_url, 7, run_id="life")
    server = [e for e in events if e["rank"] == -1]
    assert [(e["seq"], e["payload"]["status"]) for e in server] == [(1, "queued")]


async def test_queued_command_goes_down_when_the_trainer_reconnects(server_url):
    async with IngestClient(server_url, "later") as client:
        await client.send(events_for("later", 2))
        await client.wait_ack(2)
    async with httpx.AsyncClient(base_url=server_url, timeout=30) as http:
        resp = await http.post("/escalate", json={"run_id": "later", "action": "profile", "batches": 5})
        assert resp.status_code == 202
    async with IngestClient(server_url, "later") as client:
        command = await client.wait_command()
        assert command.command_id == resp.json()["command_id"] and command.request.batches == 5


async def test_a_profile_window_over_the_next_update_reaches_the_trainer_with_its_target(server_url):
    async with IngestClient(server_url, "upd") as client, httpx.AsyncClient(base_url=server_url, timeout=30) as http:
        await client.send(events_for("upd", 2))
        await client.wait_ack(2)
        resp = await http.post("/escalate", json={"run_id": "upd", "action": "profile", "target": "update"})
        assert resp.status_code == 202, resp.text
        command = await client.wait_command()
        assert command.request.target == "update" and command.request.batches is None
        record = (await http.get(f"/commands/{command.command_id}")).json()
        assert record["request"] == {"action": "profile", "run_id": "upd", "target": "update"}


async def test_undelivered_command_expires_with_an_event(tmp_path):
    with running_server(tmp_path, command_ttl_s=0.5, maintenance_interval_s=0.1) as url:
        async with IngestClient(url, "ttl") as client:
            await client.send(events_for("ttl", 1))
            await client.wait_ack(1)
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            command_id = (await http.post("/escalate", json={"run_id": "ttl", **DEBUG})).json()["command_id"]

            async def expired():
                return (await http.get(f"/commands/{command_id}")).json()["status"] == "expired"

            await async_wait_for(expired, message="command expired")
        events, _ = await collect_watch(url, 3, run_id="ttl")
        statuses = [(e["seq"], e["payload"]["status"], e["severity"]) for e in events if e["rank"] == -1]
        assert statuses == [(1, "queued", "info"), (2, "expired", "warning")]


async def test_idempotency_key_returns_the_same_command(server_url):
    async with IngestClient(server_url, "idem"), httpx.AsyncClient(base_url=server_url, timeout=30) as http:
        body = {"run_id": "idem", **DEBUG}
        first = await http.post("/escalate", json=body, headers={"Idempotency-Key": "k1"})
        again = await http.post("/escalate", json=body, headers={"Idempotency-Key": "k1"})
        assert first.status_code == again.status_code == 202
        assert first.json()["command_id"] == again.json()["command_id"]
        other = await http.post("/escalate", json={**body, "epochs": 3}, headers={"Idempotency-Key": "k1"})
        assert other.status_code == 422 and "Idempotency-Key" in other.json()["detail"]
        assert len((await http.get("/runs/idem/commands")).json()) == 1


@pytest.mark.parametrize("body, fragment", [
    ({"run_id": "v", "action": "explode", "epochs": 1}, "action"),
    ({"run_id": "v", "action": "debug"}, "epochs"),
    ({"run_id": "v", "action": "debug", "epochs": 0}, "epochs"),
    ({"run_id": "v", "action": "debug", "epochs": 100000}, "epochs"),
    ({"run_id": "v", "action": "debug", "epochs": 1, "batches": 2}, "batches"),
    ({"run_id": "v", "action": "profile"}, "batches"),
    ({"run_id": "v", "action": "profile", "batches": 501}, "batches"),
    ({"run_id": "v", "action": "profile", "target": "update", "batches": 5}, "takes no 'batches'"),
    ({"run_id": "v", "action": "profile", "target": "epoch"}, "target"),
    ({"run_id": "v", "action": "debug", "epochs": 2, "target": "update"}, "'target' belongs to action 'profile'"),
    ({"run_id": "v", "action": "debug", "epochs": 1, "colour": "red"}, "colour"),
    ({"action": "debug", "epochs": 1}, "run_id"),
    ({"run_id": "", "action": "debug", "epochs": 1}, "run_id"),
    ({"run_id": "-2+3", "action": "debug", "epochs": 1}, "Expected a run id: 1 to 128 letters"),
])
async def test_invalid_escalation_is_422_with_the_reason(server_url, body, fragment):
    async with httpx.AsyncClient(base_url=server_url, timeout=30) as http:
        resp = await http.post("/escalate", json=body)
    assert resp.status_code == 422 and fragment in resp.json()["detail"]


async def test_not_json_and_too_large_bodies(server_url):
    async with httpx.AsyncClient(base_url=server_url, timeout=30) as http:
        resp = await http.post("/escalate", content=b"{not json", headers={"content-type": "application/json"})
        assert resp.status_code == 422
        resp = await http.post("/escalate", content=b"x" * (70 * 1024))
        assert resp.status_code == 413


async def test_unknown_finished_and_lost_runs(tmp_path):
    with running_server(tmp_path, lost_after_s=0.3, maintenance_interval_s=0.1) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            assert (await http.post("/escalate", json={"run_id": "ghost", **DEBUG})).status_code == 404
            async with IngestClient(url, "done") as client:
                await client.send(events_for("done", 2) + [make_event(
                    RunFinished(status="completed", duration_s=1.0), run_id="done", seq=3, ts=1.7e9)])
                await client.wait_ack(3)
                resp = await http.post("/escalate", json={"run_id": "done", **DEBUG})
                assert resp.status_code == 409 and "finished" in resp.json()["detail"]
            async with IngestClient(url, "gone") as client:
                await client.send(events_for("gone", 1))
                await client.wait_ack(1)

            async def lost():
                return (await http.get("/runs/gone")).json()["status"] == "lost"

            await async_wait_for(lost, message="run lost")
            resp = await http.post("/escalate", json={"run_id": "gone", **DEBUG})
            assert resp.status_code == 409 and "lost" in resp.json()["detail"]
            async with IngestClient(url, "gone"):  # back: live again
                assert (await http.get("/runs/gone")).json()["status"] == "live"
                assert (await http.post("/escalate", json={"run_id": "gone", **DEBUG})).status_code == 202


async def test_too_many_open_commands_is_429(tmp_path):
    with running_server(tmp_path, max_open_commands=2) as url:
        async with IngestClient(url, "busy"), httpx.AsyncClient(base_url=url, timeout=30) as http:
            codes = await asyncio.gather(*(http.post("/escalate", json={"run_id": "busy", **DEBUG})
                                           for _ in range(4)))
            assert sorted(r.status_code for r in codes) == [202, 202, 429, 429]


async def test_unknown_command_is_404(server_url):
    async with httpx.AsyncClient(base_url=server_url, timeout=30) as http:
        assert (await http.get("/commands/nope")).status_code == 404


@pytest.mark.parametrize(("phases", "body", "refused"), [
    ([], {}, "this run has no phase 'update' (its phases: none)"),
    (["validate"], {"phase": "eval"}, "this run has no phase 'eval' (its phases: validate)"),
    (["validate"], {"phase": "validate"}, None),
    (None, {}, None),  # the run did not say: the window waits for its phase
])
async def test_a_profile_window_over_a_phase_the_run_declared_it_lacks_is_refused(server_url, phases, body, refused):
    from leyline import RunStarted

    started = make_event(RunStarted(name="r", config={}, phases=phases), run_id="phased", seq=1, ts=1.7e9)
    async with IngestClient(server_url, "phased") as client, httpx.AsyncClient(base_url=server_url, timeout=30) as http:
        await client.send([started])
        await client.wait_ack(1)
        resp = await http.post("/escalate", json={"run_id": "phased", "action": "profile", "target": "update", **body})
    if refused is None:
        assert resp.status_code == 202, resp.text
    else:
        assert resp.status_code == 422 and resp.json()["detail"].startswith(refused), resp.text
