"""A server is freed once it stopped and nothing refers to it: nothing of the product keeps an app (its store,
its runs) alive, and FastAPI's caches let go of it too between tests (``tests.support.heap``)."""

from __future__ import annotations

import gc
import weakref

import httpx

from tests.support import running_server
from tests.support.clients import IngestClient, events_for
from tests.support.heap import forget_apps


async def _used(url: str) -> None:
    async with IngestClient(url, "freed") as client:
        await client.send(events_for("freed", 5, started=True))
        await client.wait_ack(5)
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        for path in ("/runs", "/runs/freed", "/docs", "/redoc", "/openapi.json"):
            assert (await http.get(path)).status_code == 200, path


async def test_a_stopped_server_is_freed_with_all_it_held(tmp_path):
    with running_server(tmp_path) as url:
        await _used(url)
        app = weakref.ref(url.app)
    del url
    forget_apps()
    gc.collect()
    assert app() is None
