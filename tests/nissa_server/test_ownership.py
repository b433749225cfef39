"""A run's stream belongs to the secret it was created with: other clients cannot take it over, slip
events in under its seqs or receive its commands; an upload is not a live trainer."""

import sqlite3

import httpx
from websockets.asyncio.client import connect

from leyline import EventKind, encode
from leyline.frames import CLOSE_BAD_FRAME, CLOSE_CONFLICT, CLOSE_FORBIDDEN, Hello
from tests.support import IngestClient, async_wait_for, close_of, events_for, running_server, ws_url

OTHER = "another-stream-secret-" + "1" * 21


async def _hello_refused(url, run_id, secret, **hello):
    async with connect(ws_url(url, "/ws/ingest")) as ws:
        await ws.send(encode(Hello(run_id=run_id, secret=secret, **hello)).decode())
        return await close_of(ws)


async def test_a_hello_without_the_runs_secret_neither_takes_over_nor_gets_commands(server_url):
    async with IngestClient(server_url, "mine") as trainer, httpx.AsyncClient(base_url=server_url) as http:
        await trainer.send(events_for("mine", 3))
        await trainer.wait_ack(3)
        for secret in (OTHER, None):
            code, reason = await _hello_refused(server_url, "mine", secret)
            assert code == CLOSE_FORBIDDEN and "secret" in reason and "mine" in reason
        resp = await http.post("/escalate", json={"run_id": "mine", "action": "debug", "epochs": 1})
        command = await trainer.wait_command()  # the trainer still holds the run, and gets its commands
        assert command.command_id == resp.json()["command_id"]
        await trainer.send(events_for("mine", 5)[3:])
        assert await trainer.wait_ack(5) == 5
        metrics = (await http.get("/metrics")).text
    assert 'nissa_frames_rejected_total{reason="wrong_secret"} 1.0' in metrics
    assert 'nissa_frames_rejected_total{reason="no_secret"} 1.0' in metrics


async def test_the_secret_outlives_a_restart(tmp_path):
    with running_server(tmp_path) as url:
        async with IngestClient(url, "kept") as trainer:
            await trainer.send(events_for("kept", 2))
            await trainer.wait_ack(2)
    with running_server(tmp_path) as url:
        assert (await _hello_refused(url, "kept", OTHER))[0] == CLOSE_FORBIDDEN
        async with IngestClient(url, "kept") as trainer:
            assert trainer.welcome.last_seq == 2


async def test_a_seq_sent_again_with_other_content_is_refused_loudly(server_url):
    original = events_for("forge", 6)
    forged = events_for("forge", 3, start_seq=4, kinds=(EventKind.ANOMALY_DETECTED,))  # 4..6, not as stored
    async with IngestClient(server_url, "forge") as trainer:
        await trainer.send(original)
        await trainer.wait_ack(6)
        await trainer.send(original[2:] + events_for("forge", 7)[6:])  # 3..6 as stored, 7 new: fine
        assert await trainer.wait_ack(7) == 7
        await trainer.send(forged)
        code, reason = await close_of(trainer.ws)
    assert code == CLOSE_CONFLICT and "seq 4" in reason
    async with httpx.AsyncClient(base_url=server_url) as http:
        stored = (await http.get("/runs/forge/events")).json()
        metrics = (await http.get("/metrics")).text
    assert [e["kind"] for e in stored[3:6]] == [e.kind.value for e in original[3:6]]
    assert "nissa_events_conflicting_total 1.0" in metrics


async def test_a_seq_twice_in_one_batch_is_refused(server_url):
    events = events_for("twice", 3)
    async with IngestClient(server_url, "twice") as trainer:
        await trainer.send(events + [events_for("twice", 2, start_seq=3)[0]])
        code, reason = await close_of(trainer.ws)
    assert code == CLOSE_BAD_FRAME and "increase" in reason


async def test_a_run_stored_before_secrets_is_bound_by_the_first_one_presented(tmp_path):
    with running_server(tmp_path) as url:
        async with IngestClient(url, "old") as trainer:
            await trainer.send(events_for("old", 2))
            await trainer.wait_ack(2)
    side = sqlite3.connect(tmp_path / "nissa.db")
    side.execute("UPDATE runs SET secret_hash = NULL")
    side.commit()
    side.close()
    with running_server(tmp_path) as url:
        async with IngestClient(url, "old", secret=OTHER) as claimer:
            assert claimer.welcome.last_seq == 2
        assert (await _hello_refused(url, "old", IngestClient(url, "old").secret))[0] == CLOSE_FORBIDDEN


async def test_an_upload_neither_revives_a_lost_run_nor_takes_commands(tmp_path):
    with running_server(tmp_path, lost_after_s=0.2, maintenance_interval_s=0.05) as url:
        async with IngestClient(url, "gone") as trainer:
            await trainer.send(events_for("gone", 2))
            await trainer.wait_ack(2)
        async with httpx.AsyncClient(base_url=url) as http:
            async def status():
                return (await http.get("/runs/gone")).json()["status"]

            await async_wait_for(lambda: _is(status, "lost"), message="run lost")
            async with IngestClient(url, "gone", upload=True) as upload:
                await upload.send(events_for("gone", 4)[2:])
                assert await upload.wait_ack(4) == 4
                assert await status() == "lost"
                resp = await http.post("/escalate", json={"run_id": "gone", "action": "debug", "epochs": 1})
                assert resp.status_code == 409 and "lost" in resp.json()["detail"]
            async with IngestClient(url, "new-upload", upload=True) as upload:
                await upload.send(events_for("new-upload", 2))
                await upload.wait_ack(2)
            assert (await http.get("/runs/new-upload")).json()["status"] == "lost"
            async with IngestClient(url, "gone") as trainer:  # the trainer itself coming back does revive it
                assert await status() == "live"


async def _is(read, value):
    return await read() == value


async def test_an_upload_does_not_supersede_the_live_trainer(server_url):
    async with IngestClient(server_url, "both") as trainer:
        await trainer.send(events_for("both", 3))
        await trainer.wait_ack(3)
        async with IngestClient(server_url, "both", upload=True) as upload:
            await upload.send(events_for("both", 3))
            assert await upload.wait_ack(3) == 3
        await trainer.send(events_for("both", 4)[3:])
        assert await trainer.wait_ack(4) == 4
