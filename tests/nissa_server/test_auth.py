"""The auth matrix: which endpoints need the bearer token, with and without read protection."""

import httpx
import pytest
from websockets.asyncio.client import connect

from leyline.frames import CLOSE_UNAUTHORIZED, STREAM_SECRET_HEADER
from tests.nissa_server.test_access import TABLE
from tests.support import SECRET, IngestClient, close_of, collect_watch, events_for, running_server, ws_url

TOKEN = "s3cret-token"
GOOD = {"Authorization": f"Bearer {TOKEN}"}
OWNER = {STREAM_SECRET_HEADER: SECRET}
BAD_HEADERS = [{}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}, {"Authorization": "Basic abc"}]
READS = ["/runs", "/runs/sec", "/runs/sec/events", "/runs/sec/commands", "/runs/sec/artifacts", "/metrics"]


@pytest.fixture(params=[False, True], ids=["open-reads", "read-auth"])
def secured(request, tmp_path):
    with running_server(tmp_path, token=TOKEN, read_auth=request.param) as url:
        yield url, request.param


async def _ingest_refused(url, headers):
    async with connect(ws_url(url, "/ws/ingest"), additional_headers=headers) as ws:
        return await close_of(ws)


async def test_matrix(secured):
    url, read_auth = secured
    for headers in BAD_HEADERS:
        code, reason = await _ingest_refused(url, headers)
        assert code == CLOSE_UNAUTHORIZED and "token" in reason
    async with IngestClient(url, "sec", token=TOKEN) as client:
        await client.send(events_for("sec", 3))
        await client.wait_ack(3)
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            body = {"run_id": "sec", "action": "debug", "epochs": 1}
            for headers in BAD_HEADERS:
                resp = await http.post("/escalate", json=body, headers=headers)
                assert resp.status_code == 401 and resp.headers["www-authenticate"] == "Bearer"
                assert (await http.put("/runs/sec/artifacts/a.txt", content=b"x",
                                       headers={**headers, **OWNER})).status_code == 401
            assert (await http.post("/escalate", json=body, headers=GOOD)).status_code == 202
            put = await http.put("/runs/sec/artifacts/a.txt", content=b"x", headers={**GOOD, **OWNER})
            assert put.status_code == 201
            for path in READS + ["/runs/sec/artifacts/a.txt"]:
                assert (await http.get(path, headers=GOOD)).status_code == 200, path
                assert (await http.get(path)).status_code == (401 if read_auth else 200), path
            health = await http.get("/healthz")
            assert health.status_code == 200  # health checks never need the token
            # ... but how much is stored is for readers
            assert (health.json()["runs"] is None) is read_auth
            assert (await http.get("/healthz", headers=GOOD)).json()["runs"] == 1
            for headers in BAD_HEADERS:  # what a token may do, asked without needing one
                assert (await http.get("/auth", headers=headers)).json() == {"write": False, "read": not read_auth}
            assert (await http.get("/auth", headers=GOOD)).json() == {"write": True, "read": True}
    if read_auth:
        async with connect(ws_url(url, "/ws/watch", run_id="sec")) as ws:
            assert (await close_of(ws))[0] == CLOSE_UNAUTHORIZED
    events, _ = await collect_watch(url, 3, run_id="sec", token=TOKEN)
    assert [e["seq"] for e in events if e["rank"] == 0] == [1, 2, 3]


async def test_without_a_token_everything_is_open(server_url):
    async with IngestClient(server_url, "open") as client:
        await client.send(events_for("open", 1))
        assert await client.wait_ack(1) == 1


async def test_without_a_token_deleting_needs_the_server_open_on_purpose(tmp_path):
    with running_server(tmp_path) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            refused = await http.delete("/runs/any")
            assert refused.status_code == 403 and "--token" in refused.json()["detail"]
            assert "--open" in refused.json()["detail"]
    with running_server(tmp_path, open=True) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            assert (await http.delete("/runs/any")).status_code == 404  # past the check: no such run


# The open routes as the one table says them (test_access), in the OpenAPI document's spelling.
PUBLIC = {path.replace(":path}", "}") for (_, path), what in TABLE.items() if what == "open"}


@pytest.mark.single_backend
async def test_with_read_auth_every_documented_operation_refuses_alike_for_a_run_that_is_or_is_not(tmp_path):
    with running_server(tmp_path, token=TOKEN, read_auth=True) as url:
        async with IngestClient(url, "sec", token=TOKEN) as client:
            await client.send(events_for("sec", 3))
            await client.wait_ack(3)
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            paths = (await http.get("/openapi.json")).json()["paths"]
            checked = 0
            for template, operations in paths.items():
                if template in PUBLIC:
                    continue
                for method in operations:
                    answers = set()
                    for run_id in ("sec", "nope"):
                        path = template.replace("{run_id}", run_id).replace("{name}", "x").replace("{alert_id}", "x")
                        resp = await http.request(method, path.replace("{command_id}", "x"))
                        answers.add((resp.status_code, resp.text))
                    assert answers == {(401, '{"detail":"missing or wrong bearer token"}')}, (method, template)
                    checked += 1
    assert checked >= 18
