"""Events as they are stored: in blocks, one row for a run of events of one stream.

A block holds events with consecutive ids and consecutive seqs, their canonical JSON envelopes joined by
commas (so ``[`` + body + ``]`` is a JSON array, and a watch frame is built around it without touching
each event). Storing a write's events as one row costs the database one row and one entry per index for
the whole batch instead of for every event. Reads that need single events split a block back into them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import msgspec

from leyline import EventKind, Severity

# (seq, kind, severity rank, body): one event of a write, before it is stored in blocks.
Row = tuple[int, str, int, bytes]

SEVERITY_RANK = {s.value: s.rank for s in Severity}
_split = msgspec.json.Decoder(list[msgspec.Raw]).decode


class _Meta(msgspec.Struct):
    kind: str
    severity: str


_metas = msgspec.json.Decoder(list[_Meta]).decode


class Block(NamedTuple):
    """Events of one stream with consecutive ids (from ``first_id``) and seqs (from ``seq``)."""

    first_id: int
    seq: int
    n: int
    body: bytes

    @property
    def last_id(self) -> int:
        return self.first_id + self.n - 1

    @property
    def last_seq(self) -> int:
        return self.seq + self.n - 1

    @property
    def nbytes(self) -> int:
        """Bytes of its events' JSON (the commas between them not counted)."""
        return len(self.body) - self.n + 1

    def events(self) -> list[bytes]:
        """Each event's JSON, in order."""
        if self.n == 1:
            return [self.body]
        return [bytes(raw) for raw in _split(b"[" + self.body + b"]")]

    def rows(self) -> list[Row]:
        """Each event as a ``Row`` (kind and severity read back from its JSON)."""
        metas = _metas(b"[" + self.body + b"]")
        return [(self.seq + i, m.kind, SEVERITY_RANK[m.severity], body)
                for i, (m, body) in enumerate(zip(metas, self.events(), strict=True))]

    def singles(self) -> list[Block]:
        """One block per event."""
        return [Block(self.first_id + i, self.seq + i, 1, body) for i, body in enumerate(self.events())]

    def after(self, after_id: int) -> Block | None:
        """The part with ids above ``after_id`` (the block itself if all of it; None if none of it)."""
        if after_id < self.first_id:
            return self
        if after_id >= self.last_id:
            return None
        skip = after_id - self.first_id + 1
        return Block(after_id + 1, self.seq + skip, self.n - skip, b",".join(self.events()[skip:]))


class BlockSpan:
    """What holds a stream's blocks with consecutive ids (``blocks``, in id order): the ids they span."""

    __slots__ = ()
    blocks: list[Block]

    @property
    def first_id(self) -> int:
        return self.blocks[0].first_id

    @property
    def last_id(self) -> int:
        return self.blocks[-1].last_id


ALONE = frozenset({EventKind.HISTOGRAM.value})
"""Kinds whose events are each a block of their own: a read of one (a model's every layer, hundreds of KiB) takes
the event as its block is, never splitting the other events of its write out of the way."""


def pack(rows: Sequence[Row], first_id: int) -> list[Block]:
    """``rows`` (seqs increasing) numbered from ``first_id``, as blocks: a new block wherever seqs skip, and one
    for each event of the ``ALONE`` kinds."""
    alone = [i for i, row in enumerate(rows) if row[1] in ALONE]
    if not alone and rows and rows[-1][0] - rows[0][0] == len(rows) - 1:  # the usual write: one run of seqs
        return [Block(first_id, rows[0][0], len(rows), b",".join([row[3] for row in rows]))]
    cuts = set(alone) | {i + 1 for i in alone}
    out: list[Block] = []
    start = 0
    for i in range(1, len(rows) + 1):
        if i == len(rows) or rows[i][0] != rows[i - 1][0] + 1 or i in cuts:
            out.append(Block(first_id + start, rows[start][0], i - start, b",".join([r[3] for r in rows[start:i]])))
            start = i
    return out


def pieces(blocks: Sequence[Block], max_events: int, max_bytes: int) -> Iterator[Block]:
    """``blocks``, each one within the bounds as it is, the others split into single events."""
    for block in blocks:
        if block.n <= max_events and len(block.body) <= max_bytes:
            yield block
        else:
            yield from block.singles()


def from_row(row: Sequence[Any]) -> Block:
    """A block from its database columns (id, seq, n, body)."""
    return Block(row[0], row[1], row[2], bytes(row[3]))


def regroup(rows: Iterator[tuple], rare: frozenset[str], max_events: int = 2000,
            max_bytes: int = 1 << 20) -> Iterator[tuple[tuple, list[tuple]]]:
    """Event rows stored one by one, (id, run_key, rank, seq, kind, severity, body) ordered by (run_key,
    rank, seq), as blocks: each (id, run_key, rank, seq, n, body) with the ``rare_events`` rows of its
    events whose kind is in ``rare``. A block ends where ids or seqs skip, or at the bounds."""
    start: tuple | None = None
    bodies: list[bytes] = []
    marks: list[tuple] = []
    size = 0
    last: tuple = ()
    for row in rows:
        event_id, run_key, rank, seq, kind, severity, body = row
        body = bytes(body)
        if start is not None and not (last[1:3] == (run_key, rank) and last[0] + 1 == event_id
                                      and last[3] + 1 == seq and len(bodies) < max_events
                                      and size + len(body) <= max_bytes):
            yield (start[0], start[1], start[2], start[3], len(bodies), b",".join(bodies)), marks
            start = None
        if start is None:
            start, bodies, marks, size = row, [], [], 0
        bodies.append(body)
        size += len(body) + 1
        if kind in rare:
            marks.append((run_key, kind, seq, rank, event_id, severity, body))
        last = row
    if start is not None:
        yield (start[0], start[1], start[2], start[3], len(bodies), b",".join(bodies)), marks
