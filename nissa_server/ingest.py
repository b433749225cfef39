"""``/ws/ingest``: one trainer rank streams its events; acks and commands go back down.

Frames are checked at the edge: a bad, oversized or unknown frame closes that connection with a
code from ``leyline.frames`` and a reason; other connections never notice.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from collections import deque
from collections.abc import Coroutine
from typing import Any

import msgspec
from starlette.websockets import WebSocket, WebSocketDisconnect

from leyline import SERVER_RANK, AnyPayload, Command, encode, frames_v1
from leyline.codec import BatchEvent, Unsupported, WireBatch, decode_frame_wire
from leyline.frames import (
    CLOSE_BAD_FRAME,
    CLOSE_CONFLICT,
    CLOSE_DELETED,
    CLOSE_FORBIDDEN,
    CLOSE_IDLE,
    CLOSE_SUPERSEDED,
    CLOSE_TOO_LARGE,
    CLOSE_UNSUPPORTED,
    PROTOCOL,
    Ack,
    CommandFrame,
    Hello,
    Welcome,
)
from leyline.text import has_control, scrub
from nissa_server import __version__, batches, ownership
from nissa_server.protocols import engage
from nissa_server.runs import RunState, Stream
from nissa_server.state import Nissa
from nissa_server.store import EventWrite, RunGone, Superseded, history, queries, sql
from nissa_server.store.conn import Conn

logger = logging.getLogger(__name__)


class FrameRejected(Exception):
    def __init__(self, code: int, reason: str, label: str) -> None:
        super().__init__(reason)
        self.code, self.reason, self.label = code, reason, label


YIELD_EVENTS = 1000
"""Events (a frame counting 10 more) an ingest connection decodes before it lets the loop go, if no
receive has made it wait meanwhile."""


class IdleWatch:
    """Closes an ingest connection that sends no frame for ``idle_s`` while it waits for one: one timer per
    ``idle_s`` (re-armed while frames come), not a timeout set up and torn down for every frame."""

    def __init__(self, loop: asyncio.AbstractEventLoop, idle_s: float) -> None:
        self._loop, self._idle_s = loop, idle_s
        self._task = asyncio.current_task()
        self._since: float | None = None
        """When the wait for the next frame began; None while a frame is being handled."""
        self._expired = False
        self._handle = loop.call_at(loop.time() + idle_s, self._check)

    async def receive(self, next_frame: Coroutine[Any, Any, object]) -> object:
        self._since = self._loop.time()
        try:
            return await next_frame
        except asyncio.CancelledError:
            if self._expired and self._task is not None and self._task.uncancel() == 0:
                raise FrameRejected(CLOSE_IDLE, f"no frame for {self._idle_s:g} s", "idle") from None
            raise
        finally:
            self._since = None

    def _check(self) -> None:
        now = self._loop.time()
        if self._since is not None and now >= self._since + self._idle_s:
            self._expired = True
            if self._task is not None:
                self._task.cancel()
            return
        due = self._since + self._idle_s if self._since is not None else now + self._idle_s
        self._handle = self._loop.call_at(due, self._check)

    def stop(self) -> None:
        self._handle.cancel()


def close_reason(text: str) -> str:
    """A close reason fits in 123 bytes of UTF-8."""
    data = text.encode()[:123]
    return data.decode(errors="ignore")


def _rejected(err: batches.BatchRejected) -> FrameRejected:
    code = CLOSE_TOO_LARGE if err.too_large else CLOSE_BAD_FRAME
    return FrameRejected(code, str(err), "too_large" if err.too_large else "bad_event")


def _decode_error(err: msgspec.DecodeError) -> FrameRejected:
    if isinstance(err, Unsupported):  # a newer trainer's kind or schema: not a broken one
        return FrameRejected(CLOSE_UNSUPPORTED, f"unsupported: {err}", "unsupported")
    return FrameRejected(CLOSE_BAD_FRAME, f"bad frame: {err}", "bad_frame")


class IngestSession:
    """One ingest connection: a sender task writes acks and commands while the handler reads."""

    def __init__(self, ws: WebSocket, nissa: Nissa) -> None:
        self.ws = ws
        self.nissa = nissa
        self.rank = 0
        self.run: RunState | None = None
        self.stream = Stream()
        self.live = True
        """A trainer streaming as it runs; False for a late upload (no commands, no revival)."""
        self.protocol = 1
        """The ingest protocol the trainer speaks (its hello's): its command frames are written for it."""
        self.session = f"{nissa.server_id}:{uuid.uuid4().hex}"
        """Names this connection in the database: the fence its writes check while it holds the stream."""
        self._outbox: deque[str] = deque()
        self._ack = 0
        self._sent_ack = 0
        self._closing: tuple[int, str] | None = None
        self._wake = asyncio.Event()
        self.payloads: list[AnyPayload] = []
        """The last events frame's payloads, decoded as they were validated (the series are read from them)."""

    # --- called from elsewhere on the loop (never blocks) ---------------------------------

    def acked(self, seq: int) -> None:
        if seq > self._ack:
            self._ack = seq
            self._wake.set()

    def send_command(self, command: Command) -> None:
        old = self.protocol < PROTOCOL  # a trainer of protocol 1 reads its commands flat
        frame = frames_v1.encode_command(command) if old else encode(CommandFrame(command=command))
        self._outbox.append(frame.decode())
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
        self.payloads = []
        try:
            return decode_frame_wire(data, self.payloads)
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
        if has_control(frame.name):  # kept as the events' strings are (batches.body_of)
            frame = msgspec.structs.replace(frame, name=scrub(frame.name))
        return frame

    async def open(self, hello: Hello) -> RunState:
        nissa, live = self.nissa, not hello.upload
        try:
            digest = ownership.digest_of(hello)
        except ownership.NotOwner as err:
            raise FrameRejected(CLOSE_FORBIDDEN, str(err), err.label) from None
        hold_s, session = nissa.settings.hold_s, self.session

        def claim(conn: Conn) -> tuple[sql.RunRow | float, Stream | None]:
            now = time.time()
            deleted = history.deleted_at(conn, hello.run_id)
            if deleted is not None:
                return deleted, None
            row = sql.claim_run(conn, hello.run_id, hello.name, digest, live=live, now=now)
            try:
                ownership.check(row.secret_hash, digest, hello.run_id)
            except ownership.NotOwner:
                return row, None  # a stranger changes nothing
            if live:  # only the trainer itself takes over the rank, revives the run and receives commands
                sql.revive_run(conn, row.run_key, now)
                sql.take_stream(conn, row.run_key, hello.rank, session, now + hold_s)
                nissa.store.announce_taken(conn, row.run_key, hello.rank, session)
            return row, sql.load_stream(conn, row.run_key, hello.rank)

        try:
            row, stream = await nissa.store.call(claim)
        except nissa.store.errors as err:  # the database, not the trainer: it may retry
            raise FrameRejected(1011, f"store failed: {err}", "store_failed") from None
        if isinstance(row, float):
            when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(row))
            raise FrameRejected(CLOSE_DELETED, f"run deleted on this server {when}, its id stays taken: start a "
                                f"new run ({hello.run_id})", "deleted")
        try:
            ownership.check(row.secret_hash, digest, hello.run_id)
        except ownership.NotOwner as err:
            raise FrameRejected(CLOSE_FORBIDDEN, str(err), err.label) from None
        assert stream is not None
        run = nissa.store.registry.remember(row.run_key, row.run_id, row.name, row.secret_hash)
        self.rank, self.run, self.live, self.protocol = hello.rank, run, live, hello.protocol
        if live or hello.rank not in run.connections:
            run.streams[hello.rank] = stream  # an upload beside a live trainer here shares its state
        self.stream = run.streams[hello.rank]
        if live:
            run.attach(self)
        await self.ws.send_text(encode(Welcome(last_seq=self.stream.stored, server_version=__version__,
                                                protocol=PROTOCOL)).decode())
        if live:
            nissa.spawn(nissa.commands.dispatch(run))
        return run

    async def pump(self, run: RunState) -> None:
        loop = asyncio.get_running_loop()
        idle = IdleWatch(loop, self.nissa.settings.limits.ingest_idle_s)
        budget = YIELD_EVENTS
        try:
            while True:
                frame = await idle.receive(self.receive())
                if frame is None:
                    return
                if not isinstance(frame, WireBatch):
                    raise FrameRejected(CLOSE_BAD_FRAME, f"expected an events frame, not {type(frame).__name__}",
                                        "bad_frame")
                await self._ingest(run, frame.events, self.payloads, time.monotonic())  # the histogram's clock
                # Frames already received are taken without suspending: a backlog of them would hold the
                # loop (watch senders, acks, other runs, REST) until it is decoded, so it is let go now
                # and then (not after every frame: that would cost a task switch per frame).
                budget -= len(frame.events) + 10
                if budget <= 0:
                    budget = YIELD_EVENTS
                    await asyncio.sleep(0)
        finally:
            idle.stop()

    async def _ingest(self, run: RunState, events: list[BatchEvent], payloads: list[AnyPayload],
                      received: float) -> None:
        repeats = self._checked(run, events, payloads)
        await self.nissa.store.submit_built(functools.partial(self._build, run, events, payloads, received),
                                            functools.partial(self._check_repeats, run, repeats) if repeats else None)

    def _checked(self, run: RunState, events: list[BatchEvent], payloads: list[AnyPayload]) -> list[BatchEvent]:
        """Check a batch against the ingest rules; returns its events whose seqs were accepted before."""
        try:
            batches.check_batch(events, run.run_id, self.rank, self.nissa.settings.max_batch_events,
                                payloads if len(payloads) == len(events) else None)
        except batches.BatchRejected as err:
            raise _rejected(err) from None
        return batches.repeats(self.stream, events)

    def _build(self, run: RunState, events: list[BatchEvent], payloads: list[AnyPayload],
               received: float) -> EventWrite | None:
        """The write of a checked batch's new events; None (and an ack) if it has none."""
        try:
            write, duplicates = batches.build_write(run, self.rank, self.stream, events,
                                                    self.nissa.settings.max_event_bytes,
                                                    session=self.session if self.live else None, payloads=payloads)
        except batches.BatchRejected as err:
            raise _rejected(err) from None
        metrics = self.nissa.metrics
        if duplicates:
            metrics.duplicates.inc(duplicates)
        if not write.rows:
            self.acked(self.stream.stored)
            return None
        metrics.ingested.inc(len(write.rows))
        write.on_stored = functools.partial(self._stored, received)
        write.on_failed = self._store_failed
        return write

    async def _check_repeats(self, run: RunState, repeats: list[BatchEvent]) -> None:
        """Refuse seqs sent again with other content than stored: they would be dropped as duplicates.

        Called with ``store.ordered`` held, so the read is queued behind every write of this stream
        and sees them committed; repeats only follow a reconnect, so the wait is rare.
        """
        key, rank, first, last = run.run_key, self.rank, repeats[0].seq, repeats[-1].seq
        try:
            stored = dict(await self.nissa.store.call(lambda conn: queries.bodies(conn, key, rank, first, last)))
        except self.nissa.store.errors as err:  # the transaction it rode in failed (logged by the store)
            raise FrameRejected(1011, f"store failed: {err}", "store_failed") from None
        for event in repeats:
            body = stored.get(event.seq)
            if body is not None and bytes(body) != batches.body_of(event):
                self.nissa.metrics.conflicts.inc()
                reason = f"seq {event.seq} of run {run.run_id} rank {rank} is stored with other content"
                logger.warning("ingest refused: %s", reason)
                raise FrameRejected(CLOSE_CONFLICT, reason, "conflict")

    def _stored(self, received: float, seq: int) -> None:
        self.nissa.metrics.ingest_commit.observe(time.monotonic() - received)
        self.acked(seq)

    def _store_failed(self, err: BaseException) -> None:
        if self._closing is not None:  # the first failure says why; the stream's later writes follow it
            return
        if isinstance(err, Superseded):
            self._closing = (CLOSE_SUPERSEDED, str(err))
        elif isinstance(err, RunGone):
            self._closing = (CLOSE_DELETED, str(err))
        else:
            self._closing = (1011, f"store failed: {err}")
        self._wake.set()


async def serve_ingest(ws: WebSocket, nissa: Nissa) -> None:
    """The whole life of one ingest connection."""
    await ws.accept()  # its token was checked by its route (``nissa_server.access``)
    session = IngestSession(ws, nissa)
    sender: asyncio.Task | None = None
    nissa.metrics.ingest_connections.inc()
    try:
        hello = await session.hello()
        if hello is None:
            return
        engage(ws)  # it said who it is: no longer displaceable as idle
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
            if session.live:
                nissa.release(session.run, session.rank, session.session)


async def _close(ws: WebSocket, code: int, reason: str) -> None:
    try:
        await ws.close(code, close_reason(reason))
    except (RuntimeError, WebSocketDisconnect):
        # Already closed by the client or by a superseding connection.
        pass
