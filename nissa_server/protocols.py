"""uvicorn's HTTP and websocket protocols, with the limits an ASGI app cannot set for itself.

uvicorn arms no timer on a connection until its first response (``timeout_keep_alive`` starts after
one, and any byte cancels it), ``limit_concurrency`` is checked only once a request head is complete,
and ``transport.close()`` waits for the send buffer to drain, which a peer that stopped reading never
lets happen. So: a deadline for each request head, a minimum rate for each request body, a cap on
open connections that first displaces idle ones, a bound on each websocket's send buffer, and a way
for the app to cut a connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
import struct
import time
from collections.abc import Callable, Mapping
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from nissa_server.settings import ConnectionLimits

LINK = "nissa.link"
"""Scope key of a websocket's ``Link``."""

OnRefused = Callable[[str], None]
_HEAD_END = b"\r\n\r\n"  # the parser takes no bare LF: a head ends at its first empty line, CRLF-terminated
_RESET_ON_CLOSE = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends a reset and drops the send queue


class Link:
    """What a websocket route may do to its connection beyond ASGI: wait for it to end, or cut it."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self.lost = asyncio.Event()
        self.opened_at = time.monotonic()
        self.engaged = False
        """The peer said who it is (an ingest hello) or the route took it on (a watcher): until then the
        connection is idle, and may be displaced when the server is full, as a silent HTTP one may."""

    def engage(self) -> None:
        self.engaged = True

    def drop(self) -> None:
        """Cut the connection now, whatever is still buffered for the peer: a reset."""
        _reset(self._transport)

    async def settle(self, grace_s: float) -> None:
        """Give a closing connection ``grace_s`` to flush and end, then cut it."""
        try:
            await asyncio.wait_for(self.lost.wait(), grace_s)
        except TimeoutError:
            self.drop()


def _reset(transport: asyncio.Transport) -> None:
    """Cut ``transport`` now, whatever is still buffered for the peer. Closing alone would wait for a peer that
    stopped reading, and then leave the kernel holding the unsent bytes (and the peer's connection open) for
    minutes."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET_ON_CLOSE)
    transport.abort()


def link_of(scope: Mapping[str, Any]) -> Link | None:
    return scope.get(LINK)


def engage(ws: Any) -> None:
    """The route has taken the websocket ``ws`` on: it is no longer idle (see ``Link.engaged``)."""
    link = link_of(ws.scope)
    if link is not None:
        link.engage()


class LimitedHttp(HttpToolsProtocol):
    """HTTP/1.1 with a deadline on each request head, a cap on its size, a minimum rate for its body, and a
    connection cap."""

    def __init__(self, *args: Any, limits: ConnectionLimits, on_refused: OnRefused, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._limits = limits
        self._on_refused = on_refused
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_bytes = 0
        """Bytes of the request head under way so far (or, between requests, of the next one)."""
        self._in_head = True
        self._head_started = False
        self._head_tail = b""
        self._lingering: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._body_bytes = 0
        self.waiting_since = 0.0

    @property
    def awaiting_head(self) -> bool:
        """Open, and no request under way: what may be displaced when the server is full."""
        return self._head_timer is not None

    # uvicorn's own connection_made narrows asyncio's BaseTransport to Transport (with this ignore itself); this
    # override keeps uvicorn's signature.
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()
        cap = self._limits.max_connections
        if len(self.connections) > cap and self._open() > cap and not self._displace_idle():
            self._refuse(503, "busy", f"server busy: {cap} connections open")

    def _open(self) -> int:
        """Connections not already on their way out (a displaced one stays in the set until it is gone)."""
        return sum(1 for c in self.connections if not c.transport.is_closing())

    def _displace_idle(self) -> bool:
        """Close the connection that has waited longest without a request (or, a websocket, without saying
        who it is); False if none has."""
        idle = [c for c in self.connections if c is not self and (
            (isinstance(c, LimitedHttp) and c.awaiting_head) or (isinstance(c, LimitedWebSocket) and c.idle))]
        if not idle:
            return False
        oldest = min(idle, key=lambda c: c.waiting_since)
        self._on_refused("displaced")
        if isinstance(oldest, LimitedWebSocket):
            oldest.displace()
        else:
            oldest._cancel_head_timer()
            oldest.transport.close()
        return True

    def data_received(self, data: bytes) -> None:
        if self._lingering is not None:  # answered and half-closed: what the peer still sends is dropped
            return
        if self._in_head:  # counted before the parser sees it: a head too large is never parsed
            self._head_bytes += self._head_part(data)
            if self._head_bytes > self._limits.max_header_bytes:
                self._head_too_large()
                return
        super().data_received(data)

    def _head_part(self, data: bytes) -> int:
        """How many of ``data``'s bytes belong to the request head under way: up to the empty line that ends it,
        not the body after it; the CR and LF the parser skips before a request line count too.

        A request pipelined behind another in one read is counted from the next read on only: the parser
        reports no offset where the first one ends. That leaves one read (256 KiB) uncounted at most."""
        start = 0
        if not self._head_started:
            start = len(data) - len(data.lstrip(b"\r\n"))
            if start == len(data):
                return start
            self._head_started = True
        seen = self._head_tail + data[start:]
        end = seen.find(_HEAD_END)
        if end < 0:
            self._head_tail = seen[-(len(_HEAD_END) - 1):]
            return len(data)
        return start + end + len(_HEAD_END) - len(self._head_tail)

    def _head_too_large(self) -> None:
        if self.cycle is not None and not self.cycle.response_complete:
            # Pipelined behind a request whose answer is not all written: a 431 would land inside that answer.
            # Cut, not closed: a close waits for the peer to read the rest, which it may never do, and a closing
            # connection no longer counts against the cap. uvicorn's send finds the cycle disconnected and drops
            # what the app still writes.
            self._on_refused("header_too_large")
            _reset(self.transport)
        else:
            self._refuse(431, "header_too_large", f"request head over {self._limits.max_header_bytes} bytes",
                         linger=True)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._cancel_head_timer()
        super().on_headers_complete()
        if not self.parser.should_upgrade():  # a websocket handshake has no body; its frames are not HTTP
            self._arm_body_timer()

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._cancel_body_timer()
        self._in_head, self._head_started, self._head_tail, self._head_bytes = True, False, b"", 0
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.timeout_keep_alive_task is not None:  # kept alive, nothing pipelined: the next head is due
            self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        self._cancel_body_timer()
        if self._lingering is not None:
            self._lingering.cancel()
        super().connection_lost(exc)

    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        self.waiting_since = time.monotonic()
        self._head_timer = self.loop.call_later(self._limits.header_timeout_s, self._head_timeout)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timeout(self) -> None:
        self._head_timer = None
        if self._head_bytes:
            self._refuse(408, "header_timeout", f"no complete request head within {self._limits.header_timeout_s:g} s")
        else:  # never said a word: nothing to answer
            self._on_refused("idle")
            self.transport.close()

    def _arm_body_timer(self) -> None:
        self._cancel_body_timer()
        self._body_bytes = 0
        self._body_timer = self.loop.call_later(self._limits.header_timeout_s, self._body_check)

    def _cancel_body_timer(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _body_check(self) -> None:
        """A window of the body's arrival ended: too few bytes in it (while the server was reading) ends it."""
        self._body_timer = None
        window, rate = self._limits.header_timeout_s, self._limits.min_body_rate
        if self.transport.is_closing():
            return
        if self.flow.read_paused or self._body_bytes >= rate * window:  # the app is behind, or the peer keeps up
            self._arm_body_timer()
            return
        reason = f"request body slower than {rate} bytes/s"
        if self.cycle is not None and self.cycle.response_started:  # too late for an answer: just end it
            self._on_refused("body_timeout")
            self.transport.close()
        else:
            self._refuse(408, "body_timeout", reason)

    def _refuse(self, status: int, label: str, reason: str, *, linger: bool = False) -> None:
        """Answer ``status`` with ``reason`` and close, whatever the parser was in the middle of.

        ``linger``: the peer is likely still sending. Closing with its bytes unread would reset the connection,
        and a reset discards the answer before the peer reads it; so our side ends after the answer and what
        the peer still sends is read and dropped until it ends too, or ``close_grace_s`` has passed."""
        self._on_refused(label)
        self._cancel_head_timer()
        self._cancel_body_timer()
        body = reason.encode()
        self.transport.write(b"".join([
            STATUS_LINE[status], b"content-type: text/plain; charset=utf-8\r\n",
            b"content-length: %d\r\n" % len(body), b"connection: close\r\n\r\n", body,
        ]))
        if linger and self.transport.can_write_eof():
            self.transport.write_eof()
            self._lingering = self.loop.call_later(self._limits.close_grace_s, self.transport.close)
        else:
            self.transport.close()


class LimitedWebSocket(WebSocketsSansIOProtocol):
    """Websockets with a bounded send buffer, a ``Link`` in the scope, and a dead peer cut, not closed."""

    def __init__(self, *args: Any, limits: ConnectionLimits, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._limits = limits
        self.link: Link | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.transport.set_write_buffer_limits(high=self._limits.write_buffer_bytes)
        self.link = Link(self.transport)

    @property
    def idle(self) -> bool:
        """Open, and not yet taken on by its route (see ``Link.engaged``)."""
        return self.link is not None and not self.link.engaged and not self.transport.is_closing()

    @property
    def waiting_since(self) -> float:
        return self.link.opened_at if self.link is not None else 0.0

    def displace(self) -> None:
        """Make room for a newcomer: this connection never said who it is."""
        if self.link is not None:
            self.link.drop()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if self.link is not None:
            self.link.lost.set()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.handshake_exc is not None and not self.handshake_initiated and not self.close_sent:
            # websockets refused the request head (a line over 8 KiB: 414, 431; or no HTTP at all) and queued
            # its answer, which uvicorn never sends: the peer would wait forever, and shutdown answer twice.
            self.close_sent = True
            self.transport.write(b"".join(self.conn.data_to_send()))
            self.transport.close()

    def handle_connect(self, event: Any) -> None:
        super().handle_connect(event)
        scope = getattr(self, "scope", None)
        if scope is not None:  # the app's task is created, not yet started: it will find the link
            scope[LINK] = self.link

    def keepalive_timeout(self) -> None:
        super().keepalive_timeout()
        if self.link is not None:  # the peer answered no ping: close() would wait for it to read, forever
            self.link.drop()


def protocols(limits: ConnectionLimits, on_refused: OnRefused) -> dict[str, Any]:
    """uvicorn ``Config`` options that install both protocols and the keep-alive pings."""
    return dict(
        http=functools.partial(LimitedHttp, limits=limits, on_refused=on_refused),
        ws=functools.partial(LimitedWebSocket, limits=limits),
        ws_ping_interval=limits.ws_ping_interval_s, ws_ping_timeout=limits.ws_ping_timeout_s,
        h11_max_incomplete_event_size=limits.max_header_bytes,
    )
