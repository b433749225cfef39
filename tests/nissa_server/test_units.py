"""Pure logic: sequence bookkeeping, frame building, the watcher's bounded queue."""

import json

import pytest

from nissa_server.fanout import MAX_FRAME_EVENTS, Chunk, Lagging, Watcher, WatchFilter, frames
from nissa_server.runs import RunState, Stream


def test_stream_accepts_in_order_gaps_and_rejects_duplicates():
    s = Stream()
    assert [s.accept(q) for q in (1, 2, 2, 4, 5, 1)] == [True, True, False, True, True, False]
    assert (s.contiguous, s.last_seq, s.ahead) == (2, 5, {4, 5})
    assert s.accept(3) and (s.contiguous, s.ahead) == (5, set())
    assert not s.accept(4)
    assert s.next_seq() == 6 and s.contiguous == 6


def test_attach_supersedes_the_same_rank_only():
    closed = []

    class Conn:
        def __init__(self, rank):
            self.rank = rank

        def supersede(self):
            closed.append(self)

    run = RunState(run_key=1, run_id="r")
    a, b, c = Conn(0), Conn(1), Conn(0)
    run.attach(a)
    run.attach(b)
    run.attach(c)
    assert closed == [a] and run.connections == {0: c, 1: b}
    run.detach(a)  # an old connection leaving does not detach its successor
    assert run.connections[0] is c


def test_frames_are_valid_json_bounded_and_carry_the_cursor():
    items = [(i, b'{"seq":%d}' % i) for i in range(1, MAX_FRAME_EVENTS * 2 + 10)]
    built = frames(items)
    assert len(built) == 3
    decoded = [json.loads(text) for text, _ in built]
    assert [e["seq"] for d in decoded for e in d["events"]] == [i for i, _ in items]
    assert [d["cursor"] for d in decoded] == [cursor for _, cursor in built] == [2000, 4000, 4009]


async def test_watcher_queue_is_bounded_and_lagging_is_sticky():
    w = Watcher(WatchFilter(), max_pending=10, max_bytes=1000)
    first = Chunk([(1, b"{}")] * 6)
    w.offer(first)
    assert len(await w.take()) == 1 and w.pending == 6  # taken, not yet sent: still pinned
    w.sent(first)
    assert w.pending == 0 and w.pending_bytes == 0
    w.offer(Chunk([(2, b"{}")] * 6))
    w.offer(Chunk([(3, b"{}")] * 6))  # 12 > 10
    assert w.lagging and w.lagged.is_set() and w.pending == 0
    with pytest.raises(Lagging):
        await w.take()
    w.offer(Chunk([(4, b"{}")]))
    assert w.pending == 0


async def test_watcher_bytes_are_bounded_too_and_a_chunk_in_a_send_counts():
    w = Watcher(WatchFilter(), max_pending=1000, max_bytes=100)
    stuck = Chunk([(1, b"x" * 60)])
    w.offer(stuck)
    await w.take()  # its send never finishes (a peer that stopped reading)
    w.offer(Chunk([(2, b"y" * 30)]))
    assert not w.lagging and w.pending_bytes == 90
    w.offer(Chunk([(3, b"z" * 30)]))  # 120 bytes > 100, though only 3 events
    assert w.lagging
