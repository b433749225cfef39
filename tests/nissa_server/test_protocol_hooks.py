"""``nissa_server.protocols`` extends uvicorn's protocol classes, which are not public API: every method it
overrides and every attribute it reads must still be there on the installed uvicorn and httptools
(``pyproject.toml`` pins the range the suite runs against). This fails on an upgrade that moved one,
before a server misbehaves."""

from __future__ import annotations

import asyncio
import socket

import pytest
import uvicorn
from uvicorn.protocols.http import httptools_impl
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from uvicorn.server import ServerState

from nissa_server.protocols import LimitedHttp, LimitedWebSocket
from nissa_server.settings import ConnectionLimits

pytestmark = pytest.mark.single_backend

HTTP_METHODS = ("connection_made", "data_received", "on_headers_complete", "on_body", "on_message_complete",
                "on_response_complete", "connection_lost")
HTTP_ATTRIBUTES = ("connections", "timeout_keep_alive_task", "flow", "cycle", "parser", "loop", "transport")
WS_METHODS = ("connection_made", "connection_lost", "handle_connect", "keepalive_timeout")


async def _app(scope, receive, send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def test_the_overridden_methods_are_the_libraries_own():
    for name in HTTP_METHODS:
        assert callable(getattr(HttpToolsProtocol, name, None)), f"HttpToolsProtocol.{name}"
    for name in WS_METHODS:
        assert callable(getattr(WebSocketsSansIOProtocol, name, None)), f"WebSocketsSansIOProtocol.{name}"
    assert set(httptools_impl.STATUS_LINE) >= {408, 431, 503}
    assert callable(getattr(uvicorn.Server, "capture_signals", None)) and callable(uvicorn.Server.startup)
    assert {"http", "ws", "ws_ping_interval", "ws_ping_timeout", "h11_max_incomplete_event_size"} <= set(
        uvicorn.Config.__init__.__code__.co_varnames)


async def test_the_attributes_read_are_there_on_live_connections():
    config = uvicorn.Config(_app, lifespan="off", ws="websockets-sansio")
    config.load()
    state = ServerState()
    server = uvicorn.Server(config)
    assert hasattr(server, "_captured_signals") and hasattr(server, "started")
    limits = ConnectionLimits()
    ours, theirs = socket.socketpair()
    loop = asyncio.get_running_loop()
    transport, http = await loop.connect_accepted_socket(
        lambda: LimitedHttp(config=config, server_state=state, app_state={}, limits=limits,
                            on_refused=lambda label: None),
        sock=ours)
    try:
        for name in HTTP_ATTRIBUTES:
            assert hasattr(http, name), f"HttpToolsProtocol().{name}"
        assert http in http.connections and hasattr(http.flow, "read_paused")
        assert callable(http.parser.should_upgrade)
        theirs.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        await asyncio.sleep(0.05)
        assert http.cycle is not None
        assert hasattr(http.cycle, "response_started") and hasattr(http.cycle, "response_complete")
    finally:
        transport.close()
        theirs.close()
    ours, theirs = socket.socketpair()
    transport, ws = await loop.connect_accepted_socket(
        lambda: LimitedWebSocket(config=config, server_state=state, app_state={}, limits=limits), sock=ours)
    try:
        assert ws in state.connections and hasattr(ws, "transport") and ws.link is not None
    finally:
        transport.close()
        theirs.close()
