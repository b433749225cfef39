"""Every route of the app, HTTP and websocket, against one table of what it is: ``open`` (never a token), ``read``
(the token with ``--read-auth``), ``write`` (the token) or ``destructive`` (the token; refused on a server without
one unless ``--open``). The walk fails on a route the table does not know; each class is then proved by asking each
route, without the token, with a wrong one and with the right one, on servers set each way."""

from __future__ import annotations

import re

import httpx
import pytest
from fastapi import APIRouter
from starlette.routing import Mount, WebSocketRoute
from websockets.asyncio.client import connect

from leyline.frames import CLOSE_UNAUTHORIZED, STREAM_SECRET_HEADER
from nissa_server import access
from nissa_server.app import create_app
from nissa_server.settings import Settings
from tests.support import (
    SECRET,
    IngestClient,
    close_of,
    collect_watch,
    events_for,
    ingest_events,
    running_server,
    ws_url,
)

pytestmark = pytest.mark.single_backend  # about the routes, not the store
TOKEN = "t0ken"
WS = "WS"
TABLE = {
    ("GET", "/"): "open", ("GET", "/healthz"): "open", ("GET", "/auth"): "open",
    ("GET", "/openapi.json"): "open", ("GET", "/docs"): "open", ("GET", "/docs/oauth2-redirect"): "open",
    ("GET", "/redoc"): "open", ("GET", "/docs-assets"): "open",
    ("GET", "/ui"): "open", ("GET", "/ui/"): "open", ("GET", "/favicon.ico"): "open",
    ("GET", "/ui/{path:path}"): "open", ("GET", "/ui/steer.json"): "open",
    ("GET", "/ui/charts.json"): "read", ("GET", "/metrics"): "read",
    ("GET", "/runs"): "read", ("GET", "/runs-table"): "read", ("GET", "/runs/{run_id}"): "read",
    ("GET", "/runs/{run_id}/events"): "read", ("GET", "/runs/{run_id}/commands"): "read",
    ("GET", "/runs/{run_id}/series"): "read", ("GET", "/runs/{run_id}/series/{name:path}"): "read",
    ("GET", "/runs/{run_id}/markers"): "read", ("GET", "/runs/{run_id}/histograms"): "read",
    ("GET", "/runs/{run_id}/histograms/{name:path}"): "read", ("GET", "/runs/{run_id}/artifacts"): "read",
    ("GET", "/runs/{run_id}/artifacts/{name}"): "read", ("GET", "/runs/{run_id}/profiles"): "read",
    ("GET", "/runs/{run_id}/esper"): "read", ("GET", "/runs/{run_id}/alerts"): "read",
    ("GET", "/commands/{command_id}"): "read", ("GET", "/alerts"): "read", ("GET", "/alerts/rules"): "read",
    ("GET", "/alerts/{alert_id}"): "read", ("GET", "/run-groups"): "read",
    ("GET", "/run-groups/series/{name:path}"): "read", ("GET", "/config-diff"): "read",
    ("GET", "/sweeps"): "read", ("GET", "/sweeps/{sweep_id}"): "read", ("GET", "/sweeps/{sweep_id}/view"): "read",
    ("POST", "/sweeps"): "write", ("POST", "/sweeps/{sweep_id}/stop"): "write",
    ("POST", "/sweeps/{sweep_id}/lease"): "write",
    ("PATCH", "/runs/{run_id}"): "write", ("POST", "/escalate"): "write",
    ("PUT", "/runs/{run_id}/artifacts/{name}"): "write",
    ("DELETE", "/runs/{run_id}"): "destructive",
    (WS, "/ws/ingest"): "write", (WS, "/ws/watch"): "read",
}


def _served(settings: Settings) -> dict[tuple[str, str], access.Access]:
    """(method, path) → the class each route of the app declares (HEAD beside GET left out)."""
    out = {}
    for route in create_app(settings).state.routes:
        if isinstance(route, WebSocketRoute):
            methods = {WS}
        elif isinstance(route, Mount):
            methods = {"GET"}
        else:
            methods = set(route.methods or ()) - {"HEAD"}
        for method in methods:
            out[(method, route.path)] = access.access_of(route)
    return out


def test_every_route_declares_the_class_the_table_gives_it():
    served = _served(Settings())
    assert {key: value.value for key, value in served.items()} == TABLE


async def _secret(run_id: str) -> str:
    return run_id


def test_a_route_of_no_class_or_of_two_is_refused():
    stray = APIRouter()
    stray.get("/runs/{run_id}/secret")(_secret)  # in no guarded router, and not listed open
    with pytest.raises(RuntimeError, match="secret"):
        access.check_routes(stray.routes)
    listed = access.guarded(access.Access.READ)
    listed.get("/healthz")(_secret)  # listed open, yet guarded
    with pytest.raises(RuntimeError, match="healthz"):
        access.check_routes(listed.routes)


def _url(path: str) -> str:
    return re.sub(r"\{(\w+)(:path)?\}", lambda m: {"run_id": "auth-run", "path": "app.js"}.get(m[1], "x"), path)


async def _statuses(url: str, headers: dict[str, str]) -> dict[tuple[str, str], int]:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        owner = {STREAM_SECRET_HEADER: SECRET}  # an upload is the run's own: the secret is not what is tested
        return {(method, path): (await http.request(method, _url(path), headers={**headers, **owner})).status_code
                for method, path in TABLE if method != WS}


def _expected(what: str, settings: dict[str, object], token: bool) -> int | None:
    """The refusal a request of class ``what`` gets from a server of ``settings``: 401, 403, or None (served)."""
    needs = {"open": False, "read": bool(settings.get("read_auth")), "write": True, "destructive": True}[what]
    if what == "destructive" and settings.get("token") is None:
        return 403
    return 401 if needs and settings.get("token") is not None and not token else None


SERVERS = [{"token": TOKEN, "read_auth": True}, {"token": TOKEN}, {}]


@pytest.mark.parametrize("settings", SERVERS, ids=["read-auth", "token", "no-token"])
async def test_each_class_is_enforced_on_every_route(tmp_path, settings):
    with running_server(tmp_path, **settings) as url:
        await ingest_events(url, events_for("auth-run", 2, started=True), token=settings.get("token"))
        for token, headers in ((False, {}), (False, {"Authorization": "Bearer wrong"}),
                               (True, {"Authorization": f"Bearer {TOKEN}"})):
            got = await _statuses(url, headers)
            for key, status in got.items():
                refused = _expected(TABLE[key], settings, token)
                if refused is None:
                    assert status not in (401, 403), (key, headers, status)
                else:
                    assert status == refused, (key, headers, status)
            for path in ("/ws/ingest", "/ws/watch"):
                refused = _expected(TABLE[(WS, path)], settings, token)
                await _websocket(url, path, headers, refused is not None)


async def _websocket(url: str, path: str, headers: dict[str, str], refused: bool) -> None:
    token = headers.get("Authorization", "").removeprefix("Bearer ") or None
    if refused:
        async with connect(ws_url(url, path), additional_headers=headers, open_timeout=30) as ws:
            assert await close_of(ws) == (CLOSE_UNAUTHORIZED, "missing or wrong bearer token")
    elif path == "/ws/ingest":
        async with IngestClient(url, "auth-ingest", token=token) as client:  # welcomed
            assert client.welcome is not None
    else:
        events, _ = await collect_watch(url, 2, token=token, run_id="auth-run", after_seq=0)
        assert len(events) == 2
