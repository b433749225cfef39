"""History that does not grow forever, on both backends: ``DELETE /runs/{id}`` (token, 404, 409 for a live
run, artifacts too), ``nissa-server prune`` beside a running server, and the bytes a run takes."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from websockets.asyncio.client import connect

from leyline import EventKind, RunFinished, encode, make_event
from leyline.esper import EsperKind
from leyline.frames import CLOSE_DELETED, STREAM_SECRET_HEADER, Hello
from nissa_server import cli
from tests.support import SECRET, IngestClient, close_of, events_for, ingest_events, running_server, wait_status, ws_url

TOKEN = "retention-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MIXED = (EventKind.HEARTBEAT, EsperKind.EPOCH_COMPLETED, EventKind.ANOMALY_DETECTED, EsperKind.SEED_GERMINATED)


def _finished(run_id: str, n: int) -> list:
    events = events_for(run_id, n, started=True, kinds=MIXED)
    return events + [make_event(RunFinished(status="completed", duration_s=1.0), run_id=run_id, seq=n + 1, ts=1.7e9)]


async def _stored_bytes(http: httpx.AsyncClient, run_id: str) -> tuple[int, int]:
    """(stored_bytes the server reports, bytes of the event bodies it serves)."""
    run = (await http.get(f"/runs/{run_id}")).json()
    page = await http.get(f"/runs/{run_id}/events", params={"limit": 10000})
    n = len(page.json())
    return run["stored_bytes"], len(page.content) - 2 - max(0, n - 1)  # "[" + ",".join(bodies) + "]"


async def test_delete_a_run_its_events_commands_and_artifacts(tmp_path):
    with running_server(tmp_path, token=TOKEN) as url:
        await ingest_events(url, _finished("old", 20), token=TOKEN)
        await ingest_events(url, events_for("kept", 5), token=TOKEN)
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            put = await http.put("/runs/old/artifacts/trace.json", content=b"t" * 1000,
                                 headers={**AUTH, STREAM_SECRET_HEADER: SECRET})
            assert put.status_code == 201
            listed = {r["run_id"]: r["stored_bytes"] for r in (await http.get("/runs")).json()}
            assert listed["old"] > 1000 and listed["kept"] > 0
            assert (await http.delete("/runs/old")).status_code == 401
            assert (await http.delete("/runs/nope", headers=AUTH)).status_code == 404
            refused = await http.delete("/runs/kept", headers=AUTH)  # its trainer is gone, but not yet lost
            assert refused.status_code == 409 and "live" in refused.json()["detail"]
            deleted = (await http.delete("/runs/old", headers=AUTH)).json()
            assert deleted == {"run_id": "old", "events": 21, "commands": 0, "artifacts": 1,
                               "stored_bytes": listed["old"]}
            assert httpx.get(f"{url}/runs/old", timeout=30).status_code == 404
            assert (await http.get("/runs/old/artifacts/trace.json")).status_code == 404
            assert [r["run_id"] for r in (await http.get("/runs")).json()] == ["kept"]
            assert not any((url.settings.artifacts_root).glob("*/trace.json"))
        # The run stays deleted: its trainer (or an upload of its log) is refused for good, and nobody else
        # may claim its id.
        for secret, upload in ((SECRET, False), (SECRET, True), ("someone-else-" + "2" * 30, False)):
            async with connect(ws_url(url, "/ws/ingest"), additional_headers=AUTH) as ws:
                await ws.send(encode(Hello(run_id="old", secret=secret, upload=upload)).decode())
                code, reason = await close_of(ws)
            assert code == CLOSE_DELETED and "deleted" in reason and "new run" in reason
        assert httpx.get(f"{url}/runs/old", timeout=30).status_code == 404


async def test_stored_bytes_count_the_events_as_stored(server_url):
    await ingest_events(server_url, _finished("sized", 30))
    async with httpx.AsyncClient(base_url=server_url, timeout=30) as http:
        reported, served = await _stored_bytes(http, "sized")
    assert reported == served


def _prune(capsys, *args: str) -> tuple[int, list[str]]:
    code = cli.main(["prune", *args])
    return code, capsys.readouterr().out.splitlines()


def _db_args(url) -> list[str]:
    return ["--db", url.settings.db_url or str(url.settings.db_path)]


def test_prune_thins_old_runs_and_leaves_live_ones_beside_a_running_server(tmp_path, capsys):
    with running_server(tmp_path) as url:
        asyncio.run(ingest_events(url, _finished("done", 40)))

        async def live_and_counts():
            async with IngestClient(url, "running") as trainer:
                await trainer.send(events_for("running", 8, kinds=MIXED))
                await trainer.wait_ack(8)
                code, out = await asyncio.to_thread(_prune, capsys, "--older-than", "0s", "--keep-kinds",
                                                    "epoch_completed", *_db_args(url))
                async with httpx.AsyncClient(base_url=url, timeout=30) as http:
                    runs = {r["run_id"]: r for r in (await http.get("/runs")).json()}
                    events = (await http.get("/runs/done/events", params={"limit": 1000})).json()
                    live = (await http.get("/runs/running/events", params={"limit": 1000})).json()
                    sizes = await _stored_bytes(http, "done")
            return code, out, runs, events, live, sizes

        code, out, runs, events, live, (reported, served) = asyncio.run(live_and_counts())
    assert code == 0
    assert any(line.startswith("thinned done (finished): 9 metric events deleted") for line in out), out
    assert any(line.startswith("skipped running: live") for line in out)
    assert "kinds deleted: " in out[-1] and "heartbeat" in out[-1] and "epoch_completed" not in out[-1]
    kinds = {e["kind"] for e in events}
    assert kinds == {"run_started", "epoch_completed", "anomaly_detected", "seed_germinated", "run_finished"}
    assert runs["done"]["counts"].get("heartbeat") is None and runs["done"]["counts"]["anomaly_detected"] == 10
    assert len(live) == 8, "a live run is left alone"
    assert reported == served


def test_prune_refuses_bad_flags_in_one_line(tmp_path, capsys):
    for args, flag in ((["--older-than", "soon"], "--older-than"), (["--older-than", "-1d"], "--older-than"),
                       (["--older-than", "1d", "--keep-kinds", "weather"], "--keep-kinds")):
        with pytest.raises(SystemExit) as exit_:
            cli.main(["prune", "--db", str(tmp_path / "n.db"), *args])
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert exit_.value.code == 2 and err.startswith(f"nissa-server prune: error: {flag}: "), err
        assert flag != "--older-than" or "a positive number and a unit" in err


@pytest.mark.single_backend
def test_prune_of_a_missing_file_creates_nothing(tmp_path, capsys):
    for db in (tmp_path / "typo.db", tmp_path / "no-such-dir" / "n.db"):
        assert cli.main(["prune", "--older-than", "1d", "--db", str(db)]) == 2
        err = capsys.readouterr().err.strip()
        assert err == f"nissa-server prune: error: --db: no database at {db}"
    assert list(tmp_path.iterdir()) == []


async def test_a_lost_run_can_be_deleted_once_its_trainer_is_gone(tmp_path):
    with running_server(tmp_path, lost_after_s=0.2, maintenance_interval_s=0.05, open=True) as url:
        async with IngestClient(url, "left") as trainer:
            await trainer.send(events_for("left", 3))
            await trainer.wait_ack(3)
        await wait_status(url, "left", "lost")
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            assert (await http.delete("/runs/left")).json()["events"] == 3


async def test_an_upload_racing_a_delete_is_told_the_run_is_gone(tmp_path, caplog):
    """The upload said hello before the DELETE and sends its events after: the write finds no run, and the
    upload is closed for good (4404), not as if the store had failed (1011), and no traceback is logged."""
    with running_server(tmp_path, token=TOKEN) as url:
        await ingest_events(url, _finished("raced", 5), token=TOKEN)
        async with IngestClient(url, "raced", token=TOKEN, upload=True) as upload:
            async with httpx.AsyncClient(base_url=url, timeout=30) as http:
                assert (await http.delete("/runs/raced", headers=AUTH)).status_code == 200
            await upload.send(events_for("raced", 3, start_seq=20))
            assert upload.ws is not None
            code, reason = await close_of(upload.ws)
    assert code == CLOSE_DELETED and "deleted" in reason, (code, reason)
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records if r.exc_info]
