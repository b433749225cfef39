"""``/ws/ingest``: one trainer rank streams its events; acks and commands go back down.

Frames are checked at the edge: a bad, oversized or unknown frame closes that connection with a
code from ``leyline.frames`` and a reason; other connections never notice.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections import deque

import msgspec
from starlette.websockets import WebSocket, WebSocketDisconnect

from leyline import SERVER_RANK, Command, encode
from leyline.codec import BatchEvent, WireBatch, decode_frame_wire
from leyline.frames import (
    CLOSE_BAD_FRAME,
    CLOSE_CONFLICT,
    CLOSE_FORBIDDEN,
    CLOSE_IDLE,
    CLOSE_SUPERSEDED,
    CLOSE_TOO_LARGE,
    CLOSE_UNAUTHORIZED,
    CLOSE_UNSUPPORTED,
    Ack,
    CommandFrame,
    Hello,
    Welcome,
)
from nissa_server import __version__, batches, ownership, queries, writes
from nissa_server.auth import bearer_ok
from nissa_server.runs import RunState
from nissa_server.state import Nissa

logger = logging.getLogger(__name__)


class FrameRejected(Exception):
    def __init__(self, code: int, reason: str, label: str) -> None:
        super().__init__(reason)
        self.code, self.reason, self.label = code, reason, label


_encoder = msgspec.json.Encoder()


def close_reason(text: str) -> str:
    """A close reason fits in 123 bytes of UTF-8."""
    data = text.encode()[:123]
    return data.decode(errors="ignore")


def _decode_error(err: msgspec.DecodeError) -> FrameRejected:
    text = str(err)
    if ("Invalid enum value" in text and "kind`" in text) or "is newer than" in text:
        return FrameRejected(CLOSE_UNSUPPORTED, f"unsupported: {text}", "unsupported")
    return FrameRejected(CLOSE_BAD_FRAME, f"bad frame: {text}", "bad_frame")


class IngestSession:
    """One ingest connection: a sender task writes acks and commands while the handler reads."""

    def __init__(self, ws: WebSocket, nissa: Nissa) -> None:
        self.ws = ws
        self.nissa = nissa
        self.rank = 0
        self.run: RunState | None = None
        self.live = True
        """A trainer streaming as it runs; False for a late upload (no commands, no revival)."""
        self._outbox: deque[str] = deque()
        self._ack = 0
        self._sent_ack = 0
        self._closing: tuple[int, str] | None = None
        self._wake = asyncio.Event()

    # --- called from elsewhere on the loop (never blocks) ---------------------------------

    def acked(self, seq: int) -> None:
        if seq > self._ack:
            self._ack = seq
            self._wake.set()

    def send_command(self, command: Command) -> None:
        self._outbox.append(encode(CommandFrame(command=command)).decode())
        self._wake.set()

    def supersede(self) -> None:
        run_id = self.run.run_id if self.run else "?"
        self._closing = (CLOSE_SUPERSEDED, f"a newer connection took over run {run_id} rank {self.rank}")
        self._wake.set()

    async def sender(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._outbox:
                await self.ws.send_text(self._outbox.popleft())
            if self._ack > self._sent_ack:
                self._sent_ack = self._ack
                await self.ws.send_text(encode(Ack(seq=self._sent_ack)).decode())
            if self._closing is not None:
                code, reason = self._closing
                await self.ws.close(code, close_reason(reason))
                return

    # --- the connection -------------------------------------------------------------------

    async def receive(self) -> object | None:
        """The next decoded frame, or None once the client is gone."""
        message = await self.ws.receive()
        if message["type"] == "websocket.disconnect":
            return None
        data = message.get("text")
        if data is None:
            data = message.get("bytes") or b""
        limit = self.nissa.settings.max_frame_bytes
        if len(data) > limit:
            raise FrameRejected(CLOSE_TOO_LARGE, f"frame of {len(data)} bytes exceeds {limit}", "too_large")
        try:
            return decode_frame_wire(data)
        except msgspec.DecodeError as err:
            raise _decode_error(err) from None

    async def hello(self) -> Hello | None:
        frame = await asyncio.wait_for(self.receive(), self.nissa.settings.hello_timeout_s)
        if frame is None:
            return None
        if not isinstance(frame, Hello):
            raise FrameRejected(CLOSE_BAD_FRAME, f"first frame must be hello, not {type(frame).__name__}",
                                "bad_frame")
        if frame.rank == SERVER_RANK:
            raise FrameRejected(CLOSE_BAD_FRAME, f"rank {SERVER_RANK} is reserved for the server", "bad_frame")
        return frame

    async def open(self, hello: Hello) -> RunState:
        nissa = self.nissa
        try:
            run = ownership.claim(nissa.store.registry, hello)
        except ownership.NotOwner as err:
            raise FrameRejected(CLOSE_FORBIDDEN, str(err), err.label) from None
        self.rank, self.run, self.live = hello.rank, run, not hello.upload
        await nissa.store.resync(run, self.rank)
        run.touch()
        if self.live:
            run.revive()
        await nissa.store.call(lambda conn: _open_run(conn, run))
        if self.live:  # only the trainer itself takes over the rank and receives commands
            run.attach(self)
        await self.ws.send_text(encode(Welcome(last_seq=run.stream(self.rank).stored,
                                               server_version=__version__)).decode())
        if self.live:
            nissa.commands.dispatch(run)
        return run

    async def pump(self, run: RunState) -> None:
        idle_s = self.nissa.settings.limits.ingest_idle_s
        while True:
            # Frames already received are taken without suspending: without this, a backlog of
            # frames would hold the loop (watch senders, acks, other runs, REST) until it is decoded.
            await asyncio.sleep(0)
            try:
                async with asyncio.timeout(idle_s):
                    frame = await self.receive()
            except TimeoutError:
                raise FrameRejected(CLOSE_IDLE, f"no frame for {idle_s:g} s", "idle") from None
            if frame is None:
                return
            if not isinstance(frame, WireBatch):
                raise FrameRejected(CLOSE_BAD_FRAME, f"expected an events frame, not {type(frame).__name__}",
                                    "bad_frame")
            await self._ingest(run, frame.events)

    async def _ingest(self, run: RunState, events: list[BatchEvent]) -> None:
        settings, store, metrics = self.nissa.settings, self.nissa.store, self.nissa.metrics
        async with store.ordered:  # built and queued in one order (see Store.submit)
            try:
                batches.check_batch(events, run.run_id, self.rank, settings.max_batch_events)
                repeats = batches.repeats(run.stream(self.rank), events)
                if repeats:
                    await self._check_repeats(run, repeats)
                write, duplicates = batches.build_write(run, self.rank, events, settings.max_event_bytes)
            except batches.BatchRejected as err:
                code = CLOSE_TOO_LARGE if err.too_large else CLOSE_BAD_FRAME
                raise FrameRejected(code, str(err), "too_large" if err.too_large else "bad_event") from None
            if duplicates:
                metrics.duplicates.inc(duplicates)
            if not write.rows:
                self.acked(run.stream(self.rank).stored)
                return
            metrics.ingested.inc(len(write.rows))
            write.on_stored = self.acked
            write.on_failed = self._store_failed
            await store.submit(write)

    async def _check_repeats(self, run: RunState, repeats: list[BatchEvent]) -> None:
        """Refuse seqs sent again with other content than stored: they would be dropped as duplicates.

        Called with ``store.ordered`` held, so the read is queued behind every write of this stream
        and sees them committed; repeats only follow a reconnect, so the wait is rare.
        """
        key, rank, first, last = run.run_key, self.rank, repeats[0].seq, repeats[-1].seq
        try:
            stored = dict(await self.nissa.store.call(lambda conn: queries.bodies(conn, key, rank, first, last)))
        except sqlite3.Error as err:  # the transaction it rode in failed (logged by the store)
            raise FrameRejected(1011, f"store failed: {err}", "store_failed") from None
        for event in repeats:
            body = stored.get(event.seq)
            if body is not None and body != _encoder.encode(event):
                self.nissa.metrics.conflicts.inc()
                reason = f"seq {event.seq} of run {run.run_id} rank {rank} is stored with other content"
                logger.warning("ingest refused: %s", reason)
                raise FrameRejected(CLOSE_CONFLICT, reason, "conflict")

    def _store_failed(self, err: BaseException) -> None:
        self._closing = (1011, f"store failed: {err}")
        self._wake.set()


def _open_run(conn, run: RunState) -> None:
    writes.insert_run(conn, run)
    writes.touch_run(conn, run)


async def serve_ingest(ws: WebSocket, nissa: Nissa) -> None:
    """The whole life of one ingest connection."""
    await ws.accept()
    if not bearer_ok(ws.headers.get("authorization"), nissa.settings.token):
        nissa.metrics.rejected.labels("unauthorized").inc()
        await ws.close(CLOSE_UNAUTHORIZED, "missing or wrong bearer token")
        return
    session = IngestSession(ws, nissa)
    sender: asyncio.Task | None = None
    nissa.metrics.ingest_connections.inc()
    try:
        hello = await session.hello()
        if hello is None:
            return
        run = await session.open(hello)
        sender = asyncio.create_task(session.sender(), name=f"ingest-send-{run.run_id}-{hello.rank}")
        await session.pump(run)
    except FrameRejected as err:
        nissa.metrics.rejected.labels(err.label).inc()
        logger.info("ingest closed: %s", err.reason)
        await _close(ws, err.code, err.reason)
    except TimeoutError:
        await _close(ws, CLOSE_BAD_FRAME, "no hello frame in time")
    except WebSocketDisconnect:
        pass
    finally:
        nissa.metrics.ingest_connections.dec()
        if sender is not None:
            sender.cancel()
        if session.run is not None:
            session.run.detach(session)
            session.run.touch()


async def _close(ws: WebSocket, code: int, reason: str) -> None:
    try:
        await ws.close(code, close_reason(reason))
    except (RuntimeError, WebSocketDisconnect):
        # Already closed by the client or by a superseding connection.
        pass
