"""Live fan-out to watchers: ``publish`` only enqueues; each watcher drains its own bounded queue
from its own sender task, so a slow watcher never slows ingest or the other watchers."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from leyline import Severity
from nissa_server.store.blocks import Block, BlockSpan, pieces

if TYPE_CHECKING:
    from nissa_server.store import Published

logger = logging.getLogger(__name__)

MAX_FRAME_EVENTS = 2000
MAX_FRAME_BYTES = 1024 * 1024


class Lagging(Exception):
    """The watcher fell further behind than its queue allows."""


@dataclass(frozen=True)
class WatchFilter:
    """Which events a watcher wants: one run or all, some kinds or all, a minimum severity, one rank or all."""

    run_id: str | None = None
    kinds: frozenset[str] | None = None
    min_severity: Severity = Severity.DEBUG
    rank: int | None = None

    @property
    def selects_all_of_a_run(self) -> bool:
        return self.kinds is None and self.min_severity is Severity.DEBUG and self.rank is None

    def wants_run(self, run_id: str) -> bool:
        return self.run_id is None or self.run_id == run_id

    def pick(self, write: Published) -> list[Block]:
        """The events of ``write`` that pass the rank, kind and severity filters, one block each."""
        if self.rank is not None and write.rank != self.rank:
            return []
        floor, kinds = self.min_severity.rank, self.kinds
        return [Block(i, seq, 1, body) for i, (seq, kind, severity, body) in enumerate(write.rows, write.first_id)
                if severity >= floor and (kinds is None or kind in kinds)]


class Chunk(BlockSpan):
    """Blocks of events queued together; the frames built from them are cached, so a batch every watcher
    takes whole is turned into JSON text once, not once per watcher."""

    __slots__ = ("blocks", "events", "nbytes", "published", "_frames")

    def __init__(self, blocks: list[Block], published: float = 0.0) -> None:
        self.blocks = blocks
        self.published = published
        """When its events were published to the watchers (``time.monotonic``)."""
        self.events = sum(block.n for block in blocks)
        self.nbytes = sum(len(block.body) for block in blocks)
        self._frames: list[tuple[str, int]] | None = None

    def frames(self) -> list[tuple[str, int]]:
        if self._frames is None:
            self._frames = frames(self.blocks)
        return self._frames

    def __len__(self) -> int:
        return self.events


class Watcher:
    """One watch connection's queue: chunks of items, bounded by the events and bytes it holds.

    A chunk counts from the moment it is offered until its sender says it is sent, so the bounds
    cover everything a watcher pins in memory, the chunk stuck in a send to a stalled peer included.
    """

    def __init__(self, filter_: WatchFilter, max_pending: int, max_bytes: int) -> None:
        self.filter = filter_
        self.max_pending = max_pending
        self.max_bytes = max_bytes
        self.pending = 0
        self.pending_bytes = 0
        self.lagging = False
        self._chunks: deque[Chunk] = deque()
        self._wake = asyncio.Event()
        self.lagged = asyncio.Event()
        """Set once lagging, so the connection can be closed even while a send is stuck."""

    def offer(self, chunk: Chunk) -> None:
        if self.lagging:
            return
        if self.pending + len(chunk) > self.max_pending or self.pending_bytes + chunk.nbytes > self.max_bytes:
            # Drop everything: the client resumes from the cursor it last received.
            self.lagging = True
            self._chunks.clear()
            self.pending = self.pending_bytes = 0
            self.lagged.set()
        else:
            self._chunks.append(chunk)
            self.pending += len(chunk)
            self.pending_bytes += chunk.nbytes
        self._wake.set()

    async def take(self) -> list[Chunk]:
        """Everything queued so far (at least one chunk); raises ``Lagging`` once too far behind.
        Each chunk still counts as pending until ``sent`` is called for it."""
        while not self._chunks:
            if self.lagging:
                raise Lagging
            self._wake.clear()
            await self._wake.wait()
        if self.lagging:
            raise Lagging
        chunks = list(self._chunks)
        self._chunks.clear()
        return chunks

    def sent(self, chunk: Chunk) -> None:
        """``chunk`` is out of the watcher's hands (sent, or skipped)."""
        if not self.lagging:
            self.pending -= len(chunk)
            self.pending_bytes -= chunk.nbytes


def frame(blocks: list[Block]) -> str:
    """A watch ``events`` frame built from stored blocks (no re-encoding per watcher or per event)."""
    body = b",".join([block.body for block in blocks])
    return f'{{"type":"events","events":[{body.decode()}],"cursor":{blocks[-1].last_id}}}'


def frames(blocks: list[Block]) -> list[tuple[str, int]]:
    """``blocks`` as frames of bounded count and size; each with the cursor it ends at."""
    out: list[tuple[str, int]] = []
    group: list[Block] = []
    count = size = 0
    for block in pieces(blocks, MAX_FRAME_EVENTS, MAX_FRAME_BYTES):
        if group and (count + block.n > MAX_FRAME_EVENTS or size + len(block.body) > MAX_FRAME_BYTES):
            out.append((frame(group), group[-1].last_id))
            group, count, size = [], 0, 0
        group.append(block)
        count += block.n
        size += len(block.body) + 1
    if group:
        out.append((frame(group), group[-1].last_id))
    return out


class FanOut:
    """The set of watchers; ``publish`` is called once per commit, with its batches in id order, so each
    watcher gets one chunk (one send) per commit, whatever number of runs and writes it spans."""

    def __init__(self) -> None:
        self.watchers: set[Watcher] = set()
        self.lagged = 0

    def add(self, watcher: Watcher) -> None:
        self.watchers.add(watcher)

    def remove(self, watcher: Watcher) -> None:
        self.watchers.discard(watcher)

    def publish(self, batches: Sequence[Published]) -> None:
        batches = [b for b in batches if b.rows]
        if not batches:
            return
        shared: dict[str | None, Chunk | None] = {}  # a whole-run (or whole-commit) chunk, built once
        now = time.monotonic()
        for watcher in self.watchers:
            flt = watcher.filter
            if flt.selects_all_of_a_run:
                if flt.run_id not in shared:
                    blocks = [block for b in batches if flt.wants_run(b.run_id) for block in b.blocks]
                    shared[flt.run_id] = Chunk(blocks, now) if blocks else None
                chunk = shared[flt.run_id]
            else:
                picked = [i for b in batches if flt.wants_run(b.run_id) for i in flt.pick(b)]
                chunk = Chunk(picked, now) if picked else None
            if chunk is None:
                continue
            was_lagging = watcher.lagging
            watcher.offer(chunk)
            if watcher.lagging and not was_lagging:
                self.lagged += 1

    @property
    def pending(self) -> int:
        return sum(w.pending for w in self.watchers)
