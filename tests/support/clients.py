"""Real websocket clients for tests: a minimal trainer-side ingest client and a watch collector."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urlencode

import httpx
from websockets.asyncio.client import ClientConnection, connect

from leyline import Command, Event, decode_frame, encode, frames_v1, make_event
from leyline.enums import EventKind, Kind
from leyline.esper import EsperKind
from leyline.frames import PROTOCOL, Ack, CommandFrame, EventBatch, Hello, Welcome
from leyline.samples import SAMPLE_PAYLOADS

_FILLER = (EventKind.HEARTBEAT, EsperKind.EPOCH_COMPLETED, EsperKind.PPO_UPDATE)
SECRET = "test-stream-secret-" + "0" * 24
"""The stream secret test clients present unless told otherwise (a trainer draws a random one)."""


def ws_url(base: str, path: str, **params: Any) -> str:
    query = urlencode({k: v for k, v in params.items() if v is not None})
    return "ws" + base[len("http"):] + path + (f"?{query}" if query else "")


def http_get(url: str, **kwargs: Any) -> httpx.Response:
    """A GET with a deadline a busy machine meets (httpx's own is 5 s)."""
    return httpx.get(url, **{"timeout": 60, **kwargs})


def auth_headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def events_for(run_id: str, n: int, start_seq: int = 1, rank: int = 0, started: bool = False,
               kinds: tuple[Kind, ...] = _FILLER) -> list[Event]:
    """``n`` valid events with contiguous seqs; ``started`` makes the first one ``run_started``."""
    out = []
    for i in range(n):
        seq = start_seq + i
        kind = EventKind.RUN_STARTED if started and seq == 1 else kinds[i % len(kinds)]
        out.append(make_event(SAMPLE_PAYLOADS[kind], run_id=run_id, seq=seq, ts=1.7e9 + seq, rank=rank,
                              step=seq, epoch=seq // 10))
    return out


class IngestClient:
    """Speaks ``/ws/ingest`` like a trainer rank: hello, batches, acks; collects commands sent down. A client
    of ``protocol`` 1 is a trainer from before protocol 2: it reads its commands flat."""

    def __init__(self, base: str, run_id: str, rank: int = 0, token: str | None = None, name: str = "",
                 secret: str | None = SECRET, upload: bool = False, protocol: int = PROTOCOL) -> None:
        self.base, self.run_id, self.rank, self.token, self.name = base, run_id, rank, token, name
        self.secret, self.upload, self.protocol = secret, upload, protocol
        self.ws: ClientConnection | None = None
        self.welcome: Welcome | None = None
        self.acked = 0
        self.commands: list[Command] = []

    async def __aenter__(self) -> IngestClient:
        self.ws = await connect(ws_url(self.base, "/ws/ingest"), additional_headers=auth_headers(self.token),
                                max_size=None, open_timeout=30)
        await self.ws.send(encode(Hello(run_id=self.run_id, rank=self.rank, name=self.name, secret=self.secret,
                                        upload=self.upload, protocol=self.protocol)).decode())
        frame = await self.recv()
        assert isinstance(frame, Welcome), frame
        self.welcome = frame
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.ws is not None:
            await self.ws.close()

    async def send(self, events: list[Event]) -> None:
        assert self.ws is not None
        await self.ws.send(encode(EventBatch(events=events)).decode())

    async def recv(self, timeout: float = 30.0) -> object:
        assert self.ws is not None
        raw = await asyncio.wait_for(self.ws.recv(), timeout)
        frame = decode_frame(raw) if self.protocol >= PROTOCOL else frames_v1.decode_server_frame(raw)
        if isinstance(frame, Ack):
            self.acked = max(self.acked, frame.seq)
        elif isinstance(frame, CommandFrame):
            self.commands.append(frame.command)
        return frame

    async def wait_ack(self, seq: int, timeout: float = 30.0) -> int:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.acked < seq:
            await self.recv(timeout=max(0.01, deadline - loop.time()))
        return self.acked

    async def wait_command(self, timeout: float = 30.0) -> Command:
        while not self.commands:
            await self.recv(timeout=timeout)
        return self.commands.pop(0)


async def ingest_events(base: str, events: list[Event], token: str | None = None, batch: int = 500) -> int:
    """Send ``events`` (one run and rank) and wait until the last is acked; returns the ack."""
    first = events[0]
    async with IngestClient(base, first.run_id, first.rank, token=token) as client:
        for i in range(0, len(events), batch):
            await client.send(events[i:i + batch])
        return await client.wait_ack(max(e.seq for e in events))


async def collect_watch(base: str, count: int, timeout: float = 30.0, token: str | None = None,
                        **params: Any) -> tuple[list[dict], int]:
    """Open ``/ws/watch`` with ``params`` and read until ``count`` events; returns (events, last cursor)."""
    events: list[dict] = []
    cursor = 0
    async with connect(ws_url(base, "/ws/watch", **params), additional_headers=auth_headers(token),
                       max_size=None, open_timeout=30) as ws:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(events) < count:
            frame = json.loads(await asyncio.wait_for(ws.recv(), max(0.01, deadline - loop.time())))
            events.extend(frame["events"])
            cursor = frame["cursor"]
    return events, cursor


async def close_of(ws: ClientConnection, timeout: float = 30.0) -> tuple[int, str]:
    """Read until the server closes ``ws``; returns its close (code, reason)."""
    from websockets.exceptions import ConnectionClosed

    try:
        while True:
            await asyncio.wait_for(ws.recv(), timeout)
    except ConnectionClosed as closed:
        assert closed.rcvd is not None, "connection dropped without a close frame"
        return closed.rcvd.code, closed.rcvd.reason


async def wait_status(base: str, run_id: str, status: str, timeout: float = 30.0) -> None:
    """Poll ``GET /runs/{run_id}`` until the run has ``status`` (``lost`` once its trainer fell silent)."""
    import httpx

    from tests.support.waiting import async_wait_for

    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        async def reached() -> bool:
            return (await http.get(f"/runs/{run_id}")).json().get("status") == status

        await async_wait_for(reached, timeout=timeout, message=f"run {run_id} {status}")
