"""The two websocket endpoints (ingest writes, watch reads: ``nissa_server.access``); the work lives in
``nissa_server.ingest`` and ``nissa_server.watch``."""

from __future__ import annotations

from fastapi import WebSocket

from nissa_server.access import Access, guarded
from nissa_server.deps import NissaDep
from nissa_server.ingest import serve_ingest
from nissa_server.protocols import link_of
from nissa_server.state import Nissa
from nissa_server.watch import serve_watch

ingest_router = guarded(Access.WRITE)
watch_router = guarded(Access.READ)


async def _settle(ws: WebSocket, n: Nissa) -> None:
    """Once a route is done with its connection, give it the grace to end, then cut it: a peer that
    stopped reading would otherwise hold it (and what is buffered for it) open for good."""
    link = link_of(ws.scope)
    if link is not None:
        await link.settle(n.settings.limits.close_grace_s)


@ingest_router.websocket("/ws/ingest")
async def ingest(ws: WebSocket, n: NissaDep) -> None:
    try:
        await serve_ingest(ws, n)
    finally:
        await _settle(ws, n)


@watch_router.websocket("/ws/watch")
async def watch(ws: WebSocket, n: NissaDep) -> None:
    try:
        await serve_watch(ws, n)
    finally:
        await _settle(ws, n)
