"""The walking skeleton through a real server: ingest, ack, watch, REST, escalate, command down."""

import httpx

from leyline import CommandStatus, CommandStatusChanged, make_event
from tests.support import IngestClient, collect_watch, events_for


async def test_ingest_watch_rest_escalate(server_url):
    async with IngestClient(server_url, "run-a", name="alpha") as client:
        assert client.welcome.last_seq == 0
        await client.send(events_for("run-a", 50, started=True))
        assert await client.wait_ack(50) == 50
        events, cursor = await collect_watch(server_url, 50, run_id="run-a", after_seq=0)
        assert [e["seq"] for e in events] == list(range(1, 51)) and cursor > 0
        async with httpx.AsyncClient(base_url=server_url, timeout=30) as http:
            runs = (await http.get("/runs")).json()
            assert runs[0]["run_id"] == "run-a" and runs[0]["status"] == "live" and runs[0]["name"] == "demo"
            page = (await http.get("/runs/run-a/events", params={"after_seq": 10, "limit": 5})).json()
            assert [e["seq"] for e in page] == [11, 12, 13, 14, 15]
            resp = await http.post("/escalate", json={"run_id": "run-a", "action": "debug", "epochs": 2})
            assert resp.status_code == 202, resp.text
            command_id = resp.json()["command_id"]
            command = await client.wait_command()
            assert command.command_id == command_id and command.request.epochs == 2
            report = make_event(CommandStatusChanged(command_id=command_id, action=command.action,
                                                     status=CommandStatus.APPLIED, applied_step=77),
                                run_id="run-a", seq=51, ts=1.7e9, step=77)
            await client.send([report])
            await client.wait_ack(51)
            record = (await http.get(f"/commands/{command_id}")).json()
            assert record["status"] == "applied" and record["applied_step"] == 77
            assert [h["status"] for h in record["history"]] == ["queued", "applied"]
