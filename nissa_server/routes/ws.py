"""The two websocket endpoints; the work lives in ``nissa_server.ingest`` and ``nissa_server.watch``."""

from __future__ import annotations

from fastapi import APIRouter, WebSocket

from nissa_server.ingest import serve_ingest
from nissa_server.watch import serve_watch

router = APIRouter()


@router.websocket("/ws/ingest")
async def ingest(ws: WebSocket) -> None:
    await serve_ingest(ws, ws.app.state.nissa)


@router.websocket("/ws/watch")
async def watch(ws: WebSocket) -> None:
    await serve_watch(ws, ws.app.state.nissa)
