"""A page of a run's stored events (``GET /runs/{id}/events``), bounded by bytes as well as by count.

Events are up to 256 KiB each: ten thousand of them would be gigabytes in the server's memory for one
read. A page stops before its events pass ``max_bytes`` (it always holds one, when there is one), and
says where the next one starts. Ranks are merged lazily, and blocks are read a few at a time, so what a
read holds is about the page itself.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from leyline.events import MAX_INT
from nissa_server.store.conn import Conn
from nissa_server.store.queries import MAX_RANK, stream_events
from nissa_server.store.sql import INDEXED_KIND_SET

RARE_FETCH = 64
"""Rows of the rare kinds' table read per query."""


@dataclass(frozen=True)
class EventsPage:
    bodies: list[bytes]
    """The events' JSON, in (seq, rank) order."""
    last: tuple[int, int] | None
    """(seq, rank) of the last event: the cursor of the next page."""
    cut: bool
    """The page stopped at its count or its bytes: there may be more after ``last``."""


def events_page(conn: Conn, run_key: int, after_seq: int, limit: int, kinds: list[str] | None = None,
                rank: int | None = None, after_rank: int | None = None,
                max_bytes: int = 8 * 1024 * 1024) -> EventsPage:
    """Stored events after the cursor in (seq, rank) order: at most ``limit``, and no more bytes than
    ``max_bytes`` unless a single event has more.

    The cursor is (``after_seq``, ``after_rank``): the events after it have a larger seq, or the same
    seq and a larger rank. Without ``after_rank`` every event with seq ``after_seq`` is behind it.
    """
    floor = MAX_RANK if after_rank is None else after_rank
    if kinds and set(kinds) <= INDEXED_KIND_SET:
        rows = _rare(conn, run_key, after_seq, floor, kinds, rank)
    else:
        ranks = [rank] if rank is not None else [r for (r,) in conn.execute(
            "SELECT rank FROM streams WHERE run_key = ?", (run_key,)).fetchall()]
        wanted = frozenset(kinds) if kinds else None
        streams = []
        for r in ranks:
            first = after_seq + 1 if r <= floor else after_seq  # this rank's events at after_seq are ahead
            if first <= MAX_INT:  # past the largest seq there is nothing
                streams.append(((seq, r, body) for seq, body in stream_events(conn, run_key, r, first, wanted)))
        rows = heapq.merge(*streams)  # (seq, rank) are unique: bodies are never compared
    return _bounded(rows, limit, max_bytes)


def _bounded(rows: Iterable[tuple[int, int, bytes]], limit: int, max_bytes: int) -> EventsPage:
    bodies: list[bytes] = []
    last: tuple[int, int] | None = None
    size = 0
    for seq, rank, body in rows:
        if len(bodies) == limit or (bodies and size + len(body) > max_bytes):
            return EventsPage(bodies, last, cut=True)
        bodies.append(bytes(body))
        size += len(body)
        last = (seq, rank)
    return EventsPage(bodies, last, cut=False)


def _rare(conn: Conn, run_key: int, after_seq: int, after_rank: int, kinds: list[str],
          rank: int | None) -> Iterator[tuple[int, int, bytes]]:
    """Rare kinds' events after the cursor from their own table, a few rows per query."""
    where = ["run_key = ?", "(seq > ? OR (seq = ? AND rank > ?))", f"kind IN ({','.join('?' * len(kinds))})"]
    if rank is not None:
        where.append("rank = ?")
    query = f"SELECT seq, rank, body FROM rare_events WHERE {' AND '.join(where)} ORDER BY seq, rank LIMIT ?"
    while True:
        args = [run_key, after_seq, after_seq, after_rank, *kinds, *([rank] if rank is not None else [])]
        rows = conn.execute(query, (*args, RARE_FETCH)).fetchall()
        yield from rows
        if len(rows) < RARE_FETCH:
            return
        after_seq, after_rank = rows[-1][0], rows[-1][1]
