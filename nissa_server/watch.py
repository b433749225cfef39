"""``/ws/watch``: replay what is stored after the client's cursor, then stream live events.

The seam: the watcher's live queue is registered *before* the replay's upper bound is read, and live
items at or below that bound are dropped, so nothing is missed or sent twice while ingest goes on.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from dataclasses import dataclass

from starlette.websockets import WebSocket, WebSocketDisconnect

from leyline import KIND_NAMES, SERVER_RANK, Severity
from leyline.events import MAX_INT, MAX_RUN_ID, RUN_ID_PATTERN, RUN_ID_RULE
from leyline.frames import CLOSE_BAD_FRAME, CLOSE_LAGGING, CLOSE_TOO_MANY
from nissa_server.auth import BROWSER_PROTOCOL
from nissa_server.fanout import Lagging, Watcher, WatchFilter, frames
from nissa_server.ingest import close_reason
from nissa_server.pressure import WATCH_YIELD_S
from nissa_server.protocols import engage, link_of
from nissa_server.state import Nissa
from nissa_server.store import queries
from nissa_server.store.blocks import Block

logger = logging.getLogger(__name__)
REPLAY_PAGE = 2000
_INTEGER = re.compile(r"-?[0-9]{1,20}")
_RUN_ID = re.compile(RUN_ID_PATTERN)


@dataclass(frozen=True)
class WatchQuery:
    filter: WatchFilter
    after_seq: int | None
    after_id: int | None


def parse_query(params) -> WatchQuery:
    """The query string of a watch request; raises ``ValueError`` with a reason."""
    def _int(name: str, low: int = 0, high: int = MAX_INT) -> int | None:
        raw = params.get(name)
        if raw is None or raw == "":
            return None
        if not _INTEGER.fullmatch(raw):  # int() would take "1_0", " 1 " and other digits than ASCII
            raise ValueError(f"{name} must be an integer, got {raw[:40]!r}")
        value = int(raw)
        if not low <= value <= high:
            raise ValueError(f"{name} must be in {low}..{high}")
        return value

    try:
        after_seq, after_id = _int("after_seq"), _int("after_id")
    except ValueError as err:
        raise ValueError(f"bad cursor: {err}") from None
    try:
        rank = _int("rank", SERVER_RANK, queries.MAX_RANK)
    except ValueError as err:
        raise ValueError(f"bad rank: {err}") from None
    kinds = None
    if params.get("kind"):
        names = [k.strip() for k in params["kind"].split(",") if k.strip()]
        unknown = [k for k in names if k not in KIND_NAMES]
        if unknown:
            raise ValueError(f"unknown kind {unknown[0]!r}")
        kinds = frozenset(names)
    severity = Severity.DEBUG
    if params.get("min_severity"):
        try:
            severity = Severity(params["min_severity"])
        except ValueError:
            raise ValueError(f"unknown severity {params['min_severity']!r}") from None
    run_id = params.get("run_id") or None
    if run_id is not None and (len(run_id) > MAX_RUN_ID or not _RUN_ID.search(run_id)):
        raise ValueError(f"run_id {run_id[:40]!r} is not a run id: {RUN_ID_RULE}")
    flt = WatchFilter(run_id=run_id, kinds=kinds, min_severity=severity, rank=rank)
    return WatchQuery(filter=flt, after_seq=after_seq, after_id=after_id)


class WatchStream:
    """Sends replay then live frames; ``cursor`` is the id of the last event sent."""

    def __init__(self, ws: WebSocket, nissa: Nissa, watcher: Watcher, query: WatchQuery) -> None:
        self.ws, self.nissa, self.watcher, self.query = ws, nissa, watcher, query
        self.cursor = 0

    async def _send(self, blocks: list[Block]) -> None:
        for text, last_id in frames(blocks):
            await self.ws.send_text(text)
            self.cursor = last_id

    async def _start_cursor(self, upto: int) -> tuple[int, int | None]:
        """(cursor, run key to replay, or None for every run); a run not seen yet has nothing stored."""
        q = self.query
        run = await self.nissa.find_run(q.filter.run_id) if q.filter.run_id else None
        if q.filter.run_id and run is None:
            return upto, None
        run_key = run.run_key if run else None
        if q.after_id is not None:
            # Ids are given in order: one past the end names no event yet, and taken as it stands
            # it would hide every live event up to it.
            return min(q.after_id, upto), run_key
        if run is not None and q.after_seq is not None:
            rank = q.filter.rank if q.filter.rank is not None else 0
            return await self.nissa.store.read(queries.seq_to_id, run.run_key, q.after_seq, rank), run_key
        return 0, run_key

    async def run(self) -> None:
        store, flt = self.nissa.store, self.query.filter
        # Read after the watcher is registered: the seam. What is committed, not what this server has
        # published yet: an event acked to its trainer is behind a cursor given past the end.
        upto = await store.committed_upto()
        self.cursor, run_key = await self._start_cursor(upto)
        kinds = sorted(flt.kinds) if flt.kinds else None
        while self.cursor < upto:
            page = await store.read(queries.replay_page, run_key, self.cursor, upto, REPLAY_PAGE, kinds,
                                    flt.min_severity.rank, flt.rank)
            if not page:
                break
            await self._send(page)
            if sum(block.n for block in page) < REPLAY_PAGE and page[-1].last_id >= upto:
                break  # a page cut short by its bytes goes on
        await self._live(max(upto, self.cursor))

    async def _live(self, floor: int) -> None:
        """Send live chunks above ``floor`` (what replay sent), several taken at once coalesced into
        fewer frames; while the server is saturated, let them gather first (ingest goes first)."""
        pressure, sent = self.nissa.pressure, self.nissa.metrics.watch_send
        while True:
            if pressure.saturated:
                await asyncio.sleep(WATCH_YIELD_S)
            chunks = await self.watcher.take()
            if len(chunks) == 1 and chunks[0].first_id > floor:
                for text, last_id in chunks[0].frames():  # built once for every watcher that takes it whole
                    await self.ws.send_text(text)
                    self.cursor = last_id
            else:
                await self._send([part for chunk in chunks for block in chunk.blocks
                                  if (part := block.after(floor)) is not None])
            now = time.monotonic()
            for chunk in chunks:
                if chunk.last_id > floor:
                    sent.observe(now - chunk.published)
                floor = max(floor, chunk.last_id)
                self.watcher.sent(chunk)


async def serve_watch(ws: WebSocket, nissa: Nissa) -> None:
    engage(ws)  # a watcher says nothing after its query: what bounds watchers is their own cap
    offered = list(ws.scope.get("subprotocols") or ())
    await ws.accept(subprotocol=BROWSER_PROTOCOL if BROWSER_PROTOCOL in offered else None)
    settings = nissa.settings  # its token was checked by its route (``nissa_server.access``)
    try:
        query = parse_query(ws.query_params)
    except ValueError as err:
        await ws.close(CLOSE_BAD_FRAME, close_reason(str(err)))
        return
    if len(nissa.fanout.watchers) >= settings.limits.max_watchers:
        nissa.metrics.connection_refused("too_many_watchers")
        await ws.close(CLOSE_TOO_MANY, f"the server has {settings.limits.max_watchers} watchers, the most it "
                                       f"takes; try again later")
        return
    watcher = Watcher(query.filter, settings.watcher_max_pending, settings.watcher_max_pending_bytes)
    nissa.fanout.add(watcher)
    stream = WatchStream(ws, nissa, watcher, query)
    tasks = [asyncio.create_task(stream.run(), name="watch-send"),
             asyncio.create_task(_drain(ws), name="watch-receive"),
             asyncio.create_task(watcher.lagged.wait(), name="watch-lagged")]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            task.cancel()
        if watcher.lagging:
            nissa.metrics.lagged.inc()
            reason = (f"fell over {watcher.max_pending} events or {watcher.max_bytes} bytes behind; "
                      f"resume with after_id={stream.cursor}")
            logger.info("watcher closed: %s", reason)
            await _close_or_cut(ws, CLOSE_LAGGING, reason, settings.limits.close_grace_s)
        for task in done:
            if not task.cancelled() and task.exception() is not None and not isinstance(
                task.exception(), (Lagging, WebSocketDisconnect, OSError)
            ):
                logger.error("watch stream failed", exc_info=task.exception())
                await _close_or_cut(ws, 1011, "the server failed to read the stream (see its log)",
                                    settings.limits.close_grace_s)
    finally:
        for task in tasks:
            task.cancel()
        nissa.fanout.remove(watcher)


async def _close_or_cut(ws: WebSocket, code: int, reason: str, grace_s: float) -> None:
    """Close with ``code``; a peer that reads nothing cannot take even the close frame, so if it does
    not go out within ``grace_s`` the connection is cut (routes.ws gives the rest the same grace)."""
    try:
        await asyncio.wait_for(ws.close(code, close_reason(reason)), grace_s)
    except TimeoutError:
        link = link_of(ws.scope)
        if link is not None:
            link.drop()
    except (RuntimeError, WebSocketDisconnect):
        pass  # closed already


async def _drain(ws: WebSocket) -> None:
    """Read (and ignore) what the client sends, to notice when it goes away."""
    while True:
        message = await ws.receive()
        if message["type"] == "websocket.disconnect":
            return
