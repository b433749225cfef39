"""Live fan-out to watchers: ``publish`` only enqueues; each watcher drains its own bounded queue
from its own sender task, so a slow watcher never slows ingest or the other watchers."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from leyline import Severity

if TYPE_CHECKING:
    from nissa_server.store import EventWrite

logger = logging.getLogger(__name__)

Item = tuple[int, bytes]  # (server id, encoded event)
MAX_FRAME_EVENTS = 2000
MAX_FRAME_BYTES = 1024 * 1024


class Lagging(Exception):
    """The watcher fell further behind than its queue allows."""


@dataclass(frozen=True)
class WatchFilter:
    """Which events a watcher wants: one run or all, some kinds or all, a minimum severity."""

    run_id: str | None = None
    kinds: frozenset[str] | None = None
    min_severity: Severity = Severity.DEBUG

    @property
    def selects_all_of_a_run(self) -> bool:
        return self.kinds is None and self.min_severity is Severity.DEBUG

    def select(self, write: EventWrite) -> list[Item] | None:
        """The items of ``write`` this watcher wants, or None for none of them."""
        if self.run_id is not None and self.run_id != write.run.run_id:
            return None
        rows = write.rows
        if self.selects_all_of_a_run:
            return write.items
        floor = self.min_severity.rank
        kinds = self.kinds
        picked = [(r[0], r[7]) for r in rows if r[5] >= floor and (kinds is None or r[4] in kinds)]
        return picked or None


class Watcher:
    """One watch connection's queue: chunks of items, bounded by the number of events pending."""

    def __init__(self, filter_: WatchFilter, max_pending: int) -> None:
        self.filter = filter_
        self.max_pending = max_pending
        self.pending = 0
        self.lagging = False
        self._chunks: deque[list[Item]] = deque()
        self._wake = asyncio.Event()
        self.lagged = asyncio.Event()
        """Set once lagging, so the connection can be closed even while a send is stuck."""

    def offer(self, items: list[Item]) -> None:
        if self.lagging:
            return
        if self.pending + len(items) > self.max_pending:
            # Drop everything: the client resumes from the cursor it last received.
            self.lagging = True
            self._chunks.clear()
            self.pending = 0
            self.lagged.set()
        else:
            self._chunks.append(items)
            self.pending += len(items)
        self._wake.set()

    async def take(self) -> list[Item]:
        """Everything queued so far (at least one item); raises ``Lagging`` once too far behind."""
        while not self._chunks:
            if self.lagging:
                raise Lagging
            self._wake.clear()
            await self._wake.wait()
        if self.lagging:
            raise Lagging
        items: list[Item] = []
        while self._chunks:
            items.extend(self._chunks.popleft())
        self.pending = 0
        return items


def frame(items: list[Item]) -> str:
    """A watch ``events`` frame built from already-encoded events (no re-encoding per watcher)."""
    body = b",".join(item[1] for item in items)
    return '{"type":"events","events":[%s],"cursor":%d}' % (body.decode(), items[-1][0])


def frames(items: list[Item]) -> list[tuple[str, int]]:
    """Split ``items`` into frames of bounded count and size; each with the cursor it ends at."""
    out: list[tuple[str, int]] = []
    start, size = 0, 0
    for i, (_, body) in enumerate(items):
        size += len(body) + 1
        if i + 1 - start >= MAX_FRAME_EVENTS or size >= MAX_FRAME_BYTES:
            out.append((frame(items[start:i + 1]), items[i][0]))
            start, size = i + 1, 0
    if start < len(items):
        out.append((frame(items[start:]), items[-1][0]))
    return out


class FanOut:
    """The set of watchers; ``publish`` is called once per committed batch."""

    def __init__(self) -> None:
        self.watchers: set[Watcher] = set()
        self.lagged = 0

    def add(self, watcher: Watcher) -> None:
        self.watchers.add(watcher)

    def remove(self, watcher: Watcher) -> None:
        self.watchers.discard(watcher)

    def publish(self, write: EventWrite) -> None:
        if not write.rows:
            return
        for watcher in self.watchers:
            items = watcher.filter.select(write)
            if items:
                was_lagging = watcher.lagging
                watcher.offer(items)
                if watcher.lagging and not was_lagging:
                    self.lagged += 1

    @property
    def pending(self) -> int:
        return sum(w.pending for w in self.watchers)
