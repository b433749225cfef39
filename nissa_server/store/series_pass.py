"""The series pass: charts committed events behind ingest, from a durable watermark.

Writing series in the transaction that stores their events cost ingest a row per series per commit
(under a lab's load, hundreds of short rows and their merges many times a second) and the gathering on
the writer thread. Instead, about once a ``interval_s``, a pass takes the blocks committed after the
watermark (``series_sql.watermark``) up to ``published_upto`` (every id up to it is committed, on either
store), gathers their points on a worker thread, and hands the writer one row per series and the new
watermark, written in one transaction. A read adds the points of the few events past the watermark
(``series_queries``), so a chart is exact the moment its events are committed, on every server of a
shared database. A restart continues from the watermark; on a shared database the passes of several
servers take turns (the watermark row is locked, and a pass whose watermark moved meanwhile is dropped).

The bodies of this server's own writes are kept from their commit until they are charted, so a pass
reads back from the database only what another server wrote, or what did not fit.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import TYPE_CHECKING

from nissa_server.store import series_sql
from nissa_server.store.conn import Conn
from nissa_server.store.series_gather import Charted, chart

if TYPE_CHECKING:
    from nissa_server.store.base import Store
    from nissa_server.store.model import EventWrite

logger = logging.getLogger(__name__)

PASS_EVENTS = 50_000
"""Events one pass charts at most (a backlog, after a restart or an outage, takes several in a row)."""
KEPT_BYTES = 64 << 20
"""Bodies kept for the next pass, at most; past it they are read back."""
CLOSE_S = 5.0
"""At shutdown, passes run this long at most (what is left is charted by the next start)."""


def _heads(conn: Conn, mark: int, upto: int, limit: int) -> list[tuple[int, int, int]]:
    """(first id, run key, events) of the blocks with ids after ``mark`` up to ``upto``, in id order."""
    return [(int(r[0]), int(r[1]), int(r[2])) for r in conn.execute(
        "SELECT id, run_key, n FROM event_blocks WHERE id > ? AND id <= ? ORDER BY id LIMIT ?",
        (mark, upto, limit)).fetchall()]


def _bodies(conn: Conn, ids: list[int]) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    for at in range(0, len(ids), 500):
        chunk = ids[at:at + 500]
        for first_id, body in conn.execute(
                f"SELECT id, body FROM event_blocks WHERE id IN ({','.join('?' * len(chunk))})", chunk):
            out[int(first_id)] = bytes(body)
    return out


class SeriesPass:
    """Runs on the event loop beside the writer; ``remember`` is told of every committed write."""

    def __init__(self, store: Store, interval_s: float) -> None:
        self._store = store
        self.interval_s = interval_s
        self._kept: dict[int, tuple[int, bytes]] = {}
        """First id → (run key, body) of this server's blocks not yet charted."""
        self._kept_bytes = 0
        self._task: asyncio.Task | None = None
        self.passes = 0
        self.seconds = 0.0
        """CPU time spent gathering points (the writer's share is ``SeriesWriter.seconds``)."""

    def remember(self, writes: list[EventWrite]) -> None:
        for write in writes:
            for block in write.blocks if write.rows else ():
                if self._kept_bytes + len(block.body) > KEPT_BYTES:
                    return
                self._kept[block.first_id] = (write.run.run_key, block.body)
                self._kept_bytes += len(block.body)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="nissa-series-pass")

    async def stop(self) -> None:
        """Stop the loop and chart what is committed (for ``CLOSE_S`` at most)."""
        if self._task is None:
            return
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        self._task = None
        deadline = time.monotonic() + CLOSE_S
        try:
            while await self.once() and time.monotonic() < deadline:
                pass
        except self._store.errors as err:
            logger.warning("series not charted at shutdown (the next start charts them): %s", err)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                while await self.once():
                    await asyncio.sleep(0)
            except self._store.errors as err:
                logger.warning("series pass failed (retried): %s", err)
            except Exception:  # noqa: BLE001 - a bug in one pass must not stop charting for good
                logger.exception("series pass failed")

    async def once(self) -> bool:
        """One pass; True while more committed events wait to be charted."""
        store = self._store
        upto = store.published_upto
        mark = await store.read(series_sql.watermark)
        self._drop_upto(mark)
        if mark >= upto:
            return False
        heads = await store.read(_heads, mark, upto, PASS_EVENTS)
        events = 0
        for i, (_, _, n) in enumerate(heads):
            events += n
            if events >= PASS_EVENTS:
                heads = heads[:i + 1]
                break
        more = events >= PASS_EVENTS
        end = heads[-1][0] + heads[-1][2] - 1 if more else upto
        missing = [first_id for first_id, _, _ in heads if first_id not in self._kept]
        read_back = await store.read(_bodies, missing) if missing else {}
        blocks = [(run_key, first_id, self._kept[first_id][1] if first_id in self._kept else read_back[first_id])
                  for first_id, run_key, _ in heads if first_id in self._kept or first_id in read_back]
        charted = await asyncio.to_thread(self._chart, blocks)
        await store.call(functools.partial(store.series.write_pass, mark=mark, end=end, charted=charted))
        self.passes += 1
        self._drop_upto(end)
        return more

    def _chart(self, blocks: list[tuple[int, int, bytes]]) -> Charted:
        began = time.thread_time()
        try:
            return chart(blocks)
        finally:
            self.seconds += time.thread_time() - began

    def _drop_upto(self, mark: int) -> None:
        for first_id in [i for i in self._kept if i <= mark]:
            self._kept_bytes -= len(self._kept.pop(first_id)[1])
