"""Hostile and careless input to the HTTP and websocket surface (both stores): each is refused with a
reason, and the server goes on serving."""

import httpx
import pytest
from websockets.asyncio.client import connect

from leyline.frames import CLOSE_BAD_FRAME
from tests.support import ingest_events
from tests.support.clients import close_of, events_for, ws_url


@pytest.fixture
async def http(server_url):
    async with httpx.AsyncClient(base_url=server_url, timeout=30) as client:
        yield client


NUL_PATHS = ["/runs/a%00", "/runs/a/series/loss%00", "/runs/a/series/loss?runs=b%00", "/runs/a/series/x?labels=k%3D%00",
             "/runs?name=%00", "/alerts/%00", "/commands/%00", "/runs/%00/alerts", "/runs/%00/markers",
             "/runs/%00/events", "/runs/%00/commands", "/runs/%00/artifacts"]


async def test_a_nul_in_a_path_or_query_is_refused_with_a_reason(server_url, http):
    await ingest_events(server_url, events_for("a", 3, started=True))
    for path in NUL_PATHS:
        reply = await http.get(path)
        assert reply.status_code == 400, (path, reply.status_code, reply.text)
        assert "NUL" in reply.json()["detail"], path
    assert (await http.get("/runs?name=a%2500")).json() == [], "an escaped '%00' is no NUL"
    assert (await http.get("/runs/a")).json()["run_id"] == "a"


async def test_a_watch_of_no_possible_run_id_is_closed_with_a_reason(server_url):
    for run_id in ("a\x00", "a/b", "x" * 129):
        async with connect(ws_url(server_url, "/ws/watch", run_id=run_id), open_timeout=30) as ws:
            code, reason = await close_of(ws)
        assert code == CLOSE_BAD_FRAME and "is not a run id" in reason, (run_id, code, reason)
