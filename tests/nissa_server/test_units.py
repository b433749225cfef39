"""Pure logic: sequence bookkeeping, blocks of events, frame building, the watcher's bounded queue."""

import asyncio
import json
import time

import pytest

from nissa_server.fanout import MAX_FRAME_BYTES, MAX_FRAME_EVENTS, Chunk, Lagging, Watcher, WatchFilter, frames
from nissa_server.runs import RunState, Stream
from nissa_server.store.blocks import Block, pack

pytestmark = pytest.mark.single_backend


def test_stream_accepts_in_order_gaps_and_rejects_duplicates():
    s = Stream()
    assert [s.accept(q) for q in (1, 2, 2, 4, 5, 1)] == [True, True, False, True, True, False]
    assert (s.contiguous, s.last_seq, s.ahead) == (2, 5, {4, 5})
    assert s.accept(3) and (s.contiguous, s.ahead) == (5, set())
    assert not s.accept(4)
    assert s.accept(6) and s.contiguous == 6


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


def _block(first_id: int, n: int, size: int = 0) -> Block:
    return Block(first_id, first_id, n, b",".join(b'{"seq":%d,"pad":"%s"}' % (i, b"x" * size)
                                                  for i in range(first_id, first_id + n)))


def test_frames_are_valid_json_bounded_and_carry_the_cursor():
    blocks = [_block(1, 1500), _block(1501, 1500), _block(3001, 2 * MAX_FRAME_EVENTS), _block(7001, 9)]
    built = frames(blocks)
    decoded = [json.loads(text) for text, _ in built]
    assert [e["seq"] for d in decoded for e in d["events"]] == list(range(1, 7010))
    # Whole blocks while they fit; one over the bound is split into single events.
    assert [d["cursor"] for d in decoded] == [cursor for _, cursor in built] == [1500, 3500, 5500, 7009]
    assert max(len(d["events"]) for d in decoded) <= MAX_FRAME_EVENTS


def test_frames_are_bounded_in_bytes_whole_blocks_first():
    blocks = [_block(1, 3, size=MAX_FRAME_BYTES // 8), _block(4, 3, size=MAX_FRAME_BYTES // 8),
              _block(7, 1, size=MAX_FRAME_BYTES // 2)]
    built = frames(blocks)
    assert [cursor for _, cursor in built] == [6, 7]
    assert all(len(text) < MAX_FRAME_BYTES + 100 for text, _ in built)


def test_a_block_splits_and_cuts_at_any_event():
    block = _block(11, 5)
    assert [json.loads(e)["seq"] for e in block.events()] == [11, 12, 13, 14, 15]
    assert block.after(10) is block and block.after(15) is None
    tail = block.after(12)
    assert (tail.first_id, tail.seq, tail.n) == (13, 13, 3) and tail.events() == block.events()[2:]
    assert pack([(1, "k", 0, b"{}"), (2, "k", 0, b"{}"), (5, "k", 0, b"[]")], 20) == [
        Block(20, 1, 2, b"{},{}"), Block(22, 5, 1, b"[]")]


async def test_watcher_queue_is_bounded_and_lagging_is_sticky():
    w = Watcher(WatchFilter(), max_pending=10, max_bytes=1000)
    first = Chunk([Block(1, 1, 6, b",".join([b"{}"] * 6))])
    w.offer(first)
    assert len(await w.take()) == 1 and w.pending == 6  # taken, not yet sent: still pinned
    w.sent(first)
    assert w.pending == 0 and w.pending_bytes == 0
    w.offer(Chunk([Block(7, 7, 3, b"{},{},{}"), Block(10, 10, 3, b"{},{},{}")]))
    w.offer(Chunk([Block(13, 13, 6, b",".join([b"{}"] * 6))]))  # 12 > 10
    assert w.lagging and w.lagged.is_set() and w.pending == 0
    with pytest.raises(Lagging):
        await w.take()
    w.offer(Chunk([Block(19, 19, 1, b"{}")]))
    assert w.pending == 0


async def test_watcher_bytes_are_bounded_too_and_a_chunk_in_a_send_counts():
    w = Watcher(WatchFilter(), max_pending=1000, max_bytes=100)
    stuck = Chunk([Block(1, 1, 1, b"x" * 60)])
    w.offer(stuck)
    await w.take()  # its send never finishes (a peer that stopped reading)
    w.offer(Chunk([Block(2, 2, 1, b"y" * 30)]))
    assert not w.lagging and w.pending_bytes == 90
    w.offer(Chunk([Block(3, 3, 1, b"z" * 30)]))  # 120 bytes > 100, though only 3 events
    assert w.lagging


def test_pressure_is_a_writer_backlog_or_a_late_loop():
    from prometheus_client import CollectorRegistry, Histogram

    from nissa_server.pressure import LATE_S, Pressure

    backlog = [0]
    pressure = Pressure(lambda: backlog[0], capacity=100, lag=Histogram("lag", "lag", registry=CollectorRegistry()))
    assert not pressure.saturated
    backlog[0] = 25  # a quarter of the writer's queue
    assert pressure.saturated
    backlog[0] = 0
    pressure.lag = LATE_S
    assert pressure.saturated


async def test_pressure_measures_how_late_the_loop_runs_a_timer():
    from prometheus_client import CollectorRegistry, Histogram

    from nissa_server.pressure import LATE_S, Pressure

    registry = CollectorRegistry()
    pressure = Pressure(lambda: 0, capacity=100, lag=Histogram("lag", "lag", registry=registry))
    task = asyncio.create_task(pressure.watch_loop(every_s=0.01))
    await asyncio.sleep(0.015)
    time.sleep(LATE_S + 0.05)  # the loop is held: the timer due meanwhile runs late
    await asyncio.sleep(0.001)  # the overdue timer runs first
    task.cancel()
    assert pressure.lag >= LATE_S and pressure.saturated
    assert registry.get_sample_value("lag_count") >= 1
