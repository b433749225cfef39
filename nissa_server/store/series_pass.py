"""The series pass: charts committed events behind ingest, from a durable watermark.

Writing series in the transaction that stores their events cost ingest a row per series per commit (under
a lab's load, hundreds of short rows and their merges many times a second) and the gathering on the
writer thread. Instead, about once an ``interval_s``, a pass takes the blocks committed after the
watermark (``series_sql.watermark``) up to ``published_upto`` (every id up to it is committed, on either
store) and writes one row per series and the new watermark in one transaction (``Store.series_call``; a pass of
many series in several, ``series_split``). A
read adds the points of the few events past the watermark (``series_queries``), so a chart is exact the
moment its events are committed, on every server of a shared database. A restart continues from the
watermark; on a shared database the passes of several servers take turns (the watermark row is locked,
and a pass whose watermark moved meanwhile is dropped).

This server's own writes are gathered as they commit, a commit at a time on the event loop (evenly
spread, as ingest is), and kept until a pass writes them: the pass then only turns them into rows. It
reads blocks back from the database and gathers them itself only where that does not cover the range:
another server's writes, a backlog after a restart, writes past ``KEPT_EVENTS``, a failed pass.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from nissa_server.health import supervise
from nissa_server.store import series_split, series_sql
from nissa_server.store.conn import Conn
from nissa_server.store.series_gather import Charted, Gathered, add_block, joined_steps
from nissa_server.store.series_sql import PassRows

if TYPE_CHECKING:
    from nissa_server.store.base import Store
    from nissa_server.store.model import EventWrite

logger = logging.getLogger(__name__)

SERIES_PASS = "series-pass"
"""Its part in ``Health``."""
PASS_EVENTS = 50_000
"""Events one pass charts at most (a backlog, after a restart or an outage, takes several in a row)."""
KEPT_EVENTS = 2_000_000
"""Events of this server's writes kept gathered for the next pass, at most; past it the pass reads them back."""
SLICE_S = 0.004
"""Gathering runs this long at most before the event loop serves its sockets again."""
CLOSE_S = 5.0
"""At shutdown, passes run this long at most (what is left is charted by the next start)."""


def _heads(conn: Conn, mark: int, upto: int, limit: int) -> list[tuple[int, int, int]]:
    """(first id, run key, events) of the blocks with ids after ``mark`` up to ``upto``, in id order."""
    return [(int(r[0]), int(r[1]), int(r[2])) for r in conn.execute(
        "SELECT id, run_key, n FROM event_blocks WHERE id > ? AND id <= ? ORDER BY id LIMIT ?",
        (mark, upto, limit)).fetchall()]


def _progress(conn: Conn) -> tuple[int, tuple[int, int, float]]:
    """The watermark, and the pass in parts in progress (``series_split.state``)."""
    return series_sql.watermark(conn), series_split.state(conn)


def _bodies(conn: Conn, ids: list[int]) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    for at in range(0, len(ids), 500):
        chunk = ids[at:at + 500]
        for first_id, body in conn.execute(
                f"SELECT id, body FROM event_blocks WHERE id IN ({','.join('?' * len(chunk))})", chunk):
            out[int(first_id)] = bytes(body)
    return out


class _Segment:
    """Blocks of this server's in id order, and their points gathered."""

    def __init__(self) -> None:
        self.blocks: list[tuple[int, int]] = []
        """(first id, events)."""
        self.gathered = Gathered()


class _Own:
    """This server's committed blocks since the last pass, in id order, and their points: in segments (a
    pass that charted none of them hands them on as they are, gathered once)."""

    def __init__(self, segments: list[_Segment] | None = None, whole: bool = True) -> None:
        self.segments = segments or [_Segment()]
        self.events = sum(b[1] for seg in self.segments for b in seg.blocks)
        self.whole = whole
        """Every block this server committed since is here (false past ``KEPT_EVENTS``)."""

    def add(self, write: EventWrite) -> None:
        """A committed write's blocks, their points read from its payloads where ingest kept them."""
        if not self.whole or self.events + len(write.rows) > KEPT_EVENTS:
            self.whole = False
            return
        segment = self.segments[-1]
        run_key = write.run.run_key
        segment.blocks += [(block.first_id, block.n) for block in write.blocks]
        self.events += len(write.rows)
        if write.decoded is not None and len(write.decoded) == len(write.rows):
            segment.gathered.add_decoded(run_key, write.first_id, write.decoded)
        else:
            for block in write.blocks:
                add_block(segment.gathered, run_key, block.first_id, block.body)

    @property
    def first_ids(self) -> list[int]:
        return [b[0] for seg in self.segments for b in seg.blocks]

    @property
    def last_id(self) -> int:
        last = next((seg.blocks[-1] for seg in reversed(self.segments) if seg.blocks), None)
        return 0 if last is None else last[0] + last[1] - 1

    def then(self, later: _Own, after: int) -> _Own:
        """What waits after a pass that charted up to id ``after`` (or failed: 0): its own segments too if it
        charted none of them, else only ``later``'s (the rest of its are read back by the next pass)."""
        if self.whole and all(seg.blocks[0][0] > after for seg in self.segments if seg.blocks):
            return _Own(self.segments + later.segments, later.whole)
        return later


class SeriesPass:
    """Runs on the event loop beside the writer; ``remember`` is told of every committed write."""

    def __init__(self, store: Store, interval_s: float | None) -> None:
        self._store = store
        self.interval_s = interval_s
        self._own = _Own()
        self._one = asyncio.Lock()
        self._task: asyncio.Task | None = None
        self.passes = 0
        self.gathered_again = 0
        """Events a pass gathered itself, not gathered as they committed (another server's, a backlog …)."""
        self.seconds = 0.0
        """CPU time spent gathering points (the writer's share is ``SeriesWriter.seconds``)."""
        self.mark: int | None = None
        """The watermark as last read or moved here (set when the store opens)."""
        self.take_over_after_s = series_split.STALE_S
        """A pass in parts of another writer is finished here once none of its parts was written for this long (0:
        at once, as ``nissa-server prune`` does before it thins what the pass has not charted)."""
        self._watched: tuple[int, float, float] | None = None
        """The pass in parts of another writer last seen: (its writer, its last part's stamp, when first seen so)."""

    @property
    def waiting(self) -> int:
        """Events committed and not charted yet (whoever wrote them; a pass in progress has not charted its own)."""
        if self.mark is None:
            return self._own.events
        return max(0, self._store.published_upto - self.mark)

    async def catch_up(self, passes: int = 8) -> None:
        """Chart what is committed now (a read that would otherwise gather a long tail itself): passes until none
        is left, ``passes`` at most (a backlog far past ``PASS_EVENTS`` is left to the loop)."""
        for _ in range(passes):
            if not await self.once():
                return

    def remember(self, writes: list[EventWrite]) -> None:
        began = time.thread_time()
        for write in writes:
            if write.rows:
                self._own.add(write)
            write.decoded = None  # the write lives on in watchers' queues; its payloads need not
        self.seconds += time.thread_time() - began

    def start(self) -> None:
        """Pass after pass in the background; none where ``interval_s`` is None (a maintenance command,
        which calls ``once`` itself)."""
        if self.interval_s is not None:
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
        except Exception as err:  # noqa: BLE001 - shutting down goes on; the next start charts them
            logger.warning("series not charted at shutdown (the next start charts them): %s", err)

    async def merge_due(self, within_s: float = 0.0) -> None:
        """The merges the passes made due, one per writer transaction, spread over ``within_s``."""
        series, loop = self._store.series, asyncio.get_running_loop()
        until = loop.time() + within_s
        while series.due:
            await self._store.series_call(series.merge_next)
            await asyncio.sleep(max(0.0, until - loop.time()) / (len(series.due) + 1))

    async def _run(self) -> None:
        await supervise(self._store.health, SERIES_PASS, self._step, max_retry_s=self._store.max_retry_s)

    async def _step(self) -> None:
        """The merges due, spread over an interval, then the passes that chart what was committed."""
        loop = asyncio.get_running_loop()
        interval = self.interval_s or 1.0
        began = loop.time()
        await self.merge_due(interval)
        await asyncio.sleep(max(0.0, began + interval - loop.time()))
        while await self.once():
            await asyncio.sleep(0)

    async def once(self) -> bool:
        """One pass (one at a time); True while more committed events wait to be charted."""
        async with self._one:
            taken, self._own = self._own, _Own()
            try:
                more, end = await self._pass(taken)
            except BaseException:
                self._own = taken.then(self._own, 0)
                raise
            self._own = taken.then(self._own, end)
            self.mark = max(self.mark or 0, end)
            return more

    async def _pass(self, taken: _Own) -> tuple[bool, int]:
        """Charts the events after the watermark, up to the newest committed; (more wait, charted up to)."""
        store = self._store
        upto = max(store.published_upto, taken.last_id)  # ids are committed in order, up to our newest too
        mark, (pending, owner, touched) = await store.read(_progress)
        self.mark = max(self.mark or 0, mark)
        if pending > mark:  # a pass in parts in progress (another server's), or stopped halfway
            if owner != store.series.token and not self._stale(owner, touched):
                return False, mark  # its writer goes on with it
            heads = await store.read(_heads, mark, pending, KEPT_EVENTS)
            charted = await self._chart(await self._bodies(heads))
            self.gathered_again += charted.events
            written = await self._write(mark, pending, charted, again=True, seen=(owner, touched))
            return True, (pending if written else mark)
        if mark >= upto:
            return False, mark
        own = taken.first_ids if taken.whole else []
        if own:
            heads = await store.read(_heads, mark, upto, len(own) + 1)
            if [h[0] for h in heads] == own:  # all of them gathered as they committed
                charted = Charted()
                await self._in_slices(joined_steps([await self._charted(seg.gathered) for seg in taken.segments],
                                                   charted))
                # Another server's pass may have been first: the next one reads them back.
                return False, (upto if await self._write(mark, upto, charted) else mark)
        heads = await store.read(_heads, mark, upto, PASS_EVENTS)
        events = 0
        for i, (_, _, n) in enumerate(heads):
            events += n
            if events >= PASS_EVENTS:
                heads = heads[:i + 1]
                break
        more = events >= PASS_EVENTS
        end = heads[-1][0] + heads[-1][2] - 1 if more else upto
        charted = await self._chart(await self._bodies(heads))
        self.gathered_again += charted.events
        if not await self._write(mark, end, charted):
            return True, mark
        return more, end

    def _stale(self, owner: int, touched: float) -> bool:
        """Whether another writer's pass in parts (``owner``, its last part stamped ``touched``) wrote no part for
        ``take_over_after_s``: timed by this server's clock from when it first saw that stamp, never by comparing the
        stamp with this clock (two servers' clocks may be apart)."""
        now = self._store.series.clock()
        if self._watched is None or self._watched[:2] != (owner, touched):
            self._watched = (owner, touched, now)
        return now - self._watched[2] >= self.take_over_after_s

    async def _write(self, mark: int, end: int, charted: Charted, again: bool = False,
                     seen: tuple[int, float] | None = None) -> bool:
        """``charted`` written, the watermark moved from ``mark`` to ``end``; False if it was no longer ``mark``. Its
        rows are made first, on the event loop in slices: the transaction holds the writer only to store them.
        ``seen``: a take-over's (writer, stamp) of the pass in parts, refused if a part was written since."""
        store = self._store
        parts: list[PassRows] = []
        await self._in_slices(store.series.rows_steps(charted, parts, store.series_per_part))
        for i, rows in enumerate(parts, 1):  # a part a transaction (``series_split``): ingest's go on between them
            if not await store.series_call(functools.partial(store.series.write_pass, mark=mark, end=end, rows=rows,
                                                             last=i == len(parts), again=again, seen=seen)):
                return False
        self.passes += 1
        return True

    async def _bodies(self, heads: list[tuple[int, int, int]]) -> list[tuple[int, int, bytes]]:
        """The blocks of ``heads``, read back (those deleted meanwhile left out)."""
        bodies = await self._store.read(_bodies, [first_id for first_id, _, _ in heads])
        return [(run_key, first_id, bodies[first_id]) for first_id, run_key, _ in heads if first_id in bodies]

    async def _chart(self, blocks: list[tuple[int, int, bytes]]) -> Charted:
        """The blocks' points, gathered on the event loop a slice at a time (``SLICE_S``): a worker thread
        would take the GIL from the loop in turns of the switch interval, every time the loop waits for its
        sockets, and hold up every ack and watcher for as long as the gathering lasts."""
        gathered = Gathered()
        await self._in_slices(_added(gathered, blocks))
        return await self._charted(gathered)

    async def _charted(self, gathered: Gathered) -> Charted:
        """What ``gathered`` holds as arrays (a layout at a time, in slices)."""
        await self._in_slices(gathered.series_steps())
        return Charted(gathered.result, gathered.markers, gathered.events, gathered.declared)

    async def _in_slices(self, steps: Iterator[None]) -> None:
        """Runs ``steps`` on the event loop, letting it serve its sockets every ``SLICE_S``."""
        done = False
        while not done:
            began, cpu = time.perf_counter(), time.thread_time()
            done = True
            for _ in steps:
                if time.perf_counter() - began >= SLICE_S:
                    done = False
                    break
            self.seconds += time.thread_time() - cpu
            if not done:
                await asyncio.sleep(0)


def _added(gathered: Gathered, blocks: list[tuple[int, int, bytes]]) -> Iterator[None]:
    """Each block added to ``gathered``, one a step."""
    for block in blocks:
        add_block(gathered, *block)
        yield None
